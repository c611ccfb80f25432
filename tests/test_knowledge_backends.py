"""Embedding backends against loopback stand-ins, typed errors when unreachable, the CLI and a traced run."""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
from pathlib import Path

import pytest

from cli_support import pse
from pse.config import Settings
from pse.exceptions import ConfigError, EmbeddingBackendError, UserError
from pse.knowledge import (
    TUNED_HYBRID_WEIGHTS,
    HashingEmbedder,
    KnowledgeBase,
    MiniLMEmbedder,
    RunKnowledge,
    choose_backend,
    create_embedder,
)
from pse.runner import prepare_run, run_to_end
from pse.tasks import TaskRegistry
from pse.toolagent import ToolExecutor
from standins._embeddings import EmbeddingsStandIn

INCIDENT = TaskRegistry.discover().get("incident-review")


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "knowledge"
    shutil.copytree(INCIDENT.knowledge_dir, folder, ignore=shutil.ignore_patterns(".index"))  # type: ignore[arg-type]
    return folder


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize("api", ["ollama", "openai"])
def test_remote_backend_embeds_only_what_changed_and_searches(tmp_path: Path, api: str) -> None:
    folder = _folder(tmp_path)
    with EmbeddingsStandIn(api) as stand_in:  # type: ignore[arg-type]
        settings = Settings(
            kb_backend=api,
            kb_base_url=stand_in.url,
            kb_model="embed-m",
            kb_api_key="sk-test-key-0123456789abcdef",
        )  # type: ignore[arg-type]
        kb = KnowledgeBase(folder, settings)
        report = kb.build()
        assert report.embedder == f"{api}:embed-m" and stand_in.texts_embedded == report.chunks == 39
        assert {r["body"]["model"] for r in stand_in.requests} == {"embed-m"}
        assert len(stand_in.requests) == 2  # 39 chunks in batches of 32
        with (folder / "runbook-latency-triage.md").open("a") as handle:
            handle.write("\n## Extra\n\nReplica lag check.\n")
        before = stand_in.texts_embedded
        again = KnowledgeBase(folder, settings).build()
        assert again.embedded == ["runbook-latency-triage.md"]
        assert stand_in.texts_embedded - before == again.chunks_embedded
        hits = KnowledgeBase(folder, settings).search("card network connection reset", k=3)
        assert hits[0].citation.file in {"postmortem-2026-03-card-network.md", "gateway-log-pipeline.txt"}
        assert stand_in.requests[-1]["body"]["input"] == ["card network connection reset"]
        if api == "openai":
            assert stand_in.requests[0]["auth"] == "Bearer sk-test-key-0123456789abcdef"
            assert stand_in.requests[0]["path"] == "/v1/embeddings"
        else:
            assert stand_in.requests[0]["path"] == "/api/embed"


@pytest.mark.parametrize(("api", "hint"), [("ollama", "ollama serve"), ("openai", "PSE_KB_BASE_URL")])
def test_unreachable_backend_is_a_typed_error_that_says_what_to_do(
    tmp_path: Path, api: str, hint: str
) -> None:
    url = f"http://127.0.0.1:{_closed_port()}" + ("/v1" if api == "openai" else "")
    settings = Settings(kb_backend=api, kb_base_url=url, kb_timeout_s=5)  # type: ignore[arg-type]
    with pytest.raises(EmbeddingBackendError) as info:
        KnowledgeBase(_folder(tmp_path), settings).search("pool", k=3)
    message = str(info.value)
    assert url in message and hint in message and "PSE_KB_BACKEND=offline" in message


def test_a_missing_model_names_the_pull_command(tmp_path: Path) -> None:
    with EmbeddingsStandIn("ollama", fail_with=(404, 'model "nomic-embed-text" not found')) as stand_in:
        settings = Settings(kb_backend="ollama", kb_base_url=stand_in.url)
        with pytest.raises(EmbeddingBackendError, match="ollama pull nomic-embed-text"):
            KnowledgeBase(_folder(tmp_path), settings).build()
    assert not (tmp_path / "knowledge" / ".index" / "offline" / "manifest.json").exists()


def test_openai_backend_without_key_or_url_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="PSE_KB_API_KEY"):
        create_embedder(Settings(kb_backend="openai"))


def test_unreachable_backend_through_the_tool_ends_as_infrastructure_error(tmp_path: Path) -> None:
    settings = Settings(kb_backend="ollama", kb_base_url=f"http://127.0.0.1:{_closed_port()}", kb_timeout_s=5)
    knowledge = RunKnowledge(_folder(tmp_path), settings)
    (tmp_path / "ws").mkdir()
    executor = ToolExecutor(tmp_path / "ws", settings, registry=knowledge.registry)
    batch = executor.execute_sync(
        "Planner",
        '<tool_calls><invoke name="search_knowledge"><parameter name="query">pool</parameter></invoke></tool_calls>',
    )
    assert batch.records[0].status == "error" and "tool machinery failed" in batch.records[0].output
    assert "EmbeddingBackendError" in str(executor.infrastructure_error)


def _own_task(tmp_path: Path) -> Path:
    tasks = tmp_path / "tasks"
    shutil.copytree(INCIDENT.dir, tasks / "incident-kb", ignore=shutil.ignore_patterns(".index"))
    (tasks / "registry.toml").write_text('[tasks.incident-kb]\npath = "incident-kb"\n')
    return tasks


def test_cli_build_and_search(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    tasks = _own_task(tmp_path)
    code, out, _ = pse(monkeypatch, capsys, "kb", "build", "incident-kb", "--tasks-dir", str(tasks), "--json")
    report = json.loads(out)
    assert code == 0 and report["files"] == 7 and len(report["embedded"]) == 7
    assert report["index_dir"] == str(tasks / "incident-kb" / "knowledge" / ".index" / "offline")
    code, out, _ = pse(monkeypatch, capsys, "kb", "build", "incident-kb", "--tasks-dir", str(tasks))
    assert code == 0 and "index up to date" in out and "embedded 0 file(s)" in out
    code, out, _ = pse(
        monkeypatch,
        capsys,
        "kb",
        "search",
        "incident-kb",
        "frontend release",
        "--k",
        "2",
        "--json",
        "--tasks-dir",
        str(tasks),
    )
    results = json.loads(out)["results"]
    assert code == 0 and [r["rank"] for r in results] == [1, 2]
    assert results[0]["citation"]["file"] == "runbook-release-rollback.md"
    code, out, _ = pse(
        monkeypatch, capsys, "kb", "search", "incident-kb", "frontend release", "--tasks-dir", str(tasks)
    )
    assert code == 0 and "1. runbook-release-rollback.md:" in out and "score " in out
    monkeypatch.setenv("PSE_KB_BACKEND", "ollama")
    monkeypatch.setenv("PSE_KB_HOST", f"http://127.0.0.1:{_closed_port()}")
    # The offline index is never searched with Ollama's vectors: Ollama gets an index of its own, whose
    # build needs the (here unreachable) server; the offline one stays as it was.
    offline = (tasks / "incident-kb" / "knowledge" / ".index" / "offline" / "manifest.json").read_bytes()
    code, _, err = pse(monkeypatch, capsys, "kb", "search", "incident-kb", "pool", "--tasks-dir", str(tasks))
    assert code == 3 and "ollama" in err.lower()
    assert (
        tasks / "incident-kb" / "knowledge" / ".index" / "offline" / "manifest.json"
    ).read_bytes() == offline
    code, _, err = pse(monkeypatch, capsys, "kb", "build", "incident-kb", "--tasks-dir", str(tasks))
    assert code == 3 and "ollama serve" in err  # the rebuild reaches the backend, which is down


def test_cli_task_without_knowledge_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = pse(monkeypatch, capsys, "kb", "search", "code-delivery", "sorting")
    assert code == 2 and "has no knowledge folder" in err


def test_a_run_with_injection_records_the_retrieval_in_the_trace(tmp_path: Path) -> None:
    tasks = _own_task(tmp_path)
    settings = Settings(tasks_dir=tasks, runs_dir=tmp_path / "runs", kb_inject_top_k=3)
    prepared = prepare_run("incident-kb", settings)
    summary = asyncio.run(run_to_end(prepared))
    trace = json.loads(Path(summary.trace).read_text())
    assert summary.outcome == "PASSED"
    assert "## Knowledge (retrieved for this task" in trace["task_message"]
    assert str(tmp_path) not in trace["task_message"].split("## Knowledge")[1]
    retrievals = trace["cycles"][0]["retrievals"]
    # The injected retrieval comes first; the Specialist's own search_knowledge call follows it.
    assert [(r["kind"], len(r["results"])) for r in retrievals] == [("retrieval", 3), ("retrieval", 5)]
    assert (
        retrievals[0]["run_id"] == summary.run_id and retrievals[0]["query"] == INCIDENT.config.goal.strip()
    )
    first = retrievals[0]["results"][0]
    assert f"[{first['file']}:{first['start_line']}-{first['end_line']}]" in trace["task_message"]


def test_auto_is_offline_without_the_extra_and_the_build_says_why(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setattr("pse.knowledge._embedders.minilm_missing", lambda: "torch not installed")
    monkeypatch.delenv("PSE_KB_BACKEND")  # the default, auto
    tasks = _own_task(tmp_path)
    code, out, _ = pse(monkeypatch, capsys, "kb", "build", "incident-kb", "--tasks-dir", str(tasks))
    said = " ".join(out.split())
    assert code == 0 and "backend offline: offline:hashing-v1:dim=4096" in said
    assert "PSE_KB_BACKEND=auto: the embeddings extra is not installed (torch not installed)" in said
    assert "pip install 'pse[embeddings]' for MiniLM" in said
    manifest = json.loads(
        (tasks / "incident-kb" / "knowledge" / ".index" / "offline" / "manifest.json").read_text()
    )
    assert (manifest["backend"], manifest["embedder"]) == ("offline", "offline:hashing-v1:dim=4096:w=1,0.5,1")
    with pytest.raises(ConfigError, match=r"minilm needs the embeddings extra \(torch not installed\)"):
        create_embedder(Settings(kb_backend="minilm"))


def test_auto_with_the_extra_is_minilm_with_its_tuned_weight(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr("pse.knowledge._embedders.minilm_missing", lambda: None)
    assert choose_backend(Settings(kb_backend="auto")) == (
        "minilm",
        "PSE_KB_BACKEND=auto: the embeddings extra is installed",
    )
    embedder = create_embedder(Settings(kb_backend="auto"))  # no model is loaded before the first embed
    assert isinstance(embedder, MiniLMEmbedder) and embedder.identity.startswith("minilm:all-MiniLM-L6-v2@")
    folder = _folder(tmp_path)
    assert KnowledgeBase(folder, Settings(kb_backend="auto")).hybrid_weight == TUNED_HYBRID_WEIGHTS["minilm"]
    assert KnowledgeBase(folder, Settings(kb_backend="offline")).hybrid_weight == 0.3
    assert KnowledgeBase(folder, Settings(kb_backend="auto", kb_hybrid_weight=0.5)).hybrid_weight == 0.5


def test_an_index_of_another_embedder_is_refused_until_rebuilt(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    first = KnowledgeBase(folder, Settings(), embedder=HashingEmbedder(dim=1024)).build()
    manifest = folder / ".index" / "offline" / "manifest.json"
    before = manifest.read_bytes()
    with pytest.raises(UserError) as info:
        KnowledgeBase(folder, Settings(), task="incident-kb").search("pool", k=3)
    message = str(info.value)
    assert "was built with offline:hashing-v1:dim=1024" in message
    assert "queries would be embedded with offline:hashing-v1:dim=4096" in message
    assert "`PSE_KB_BACKEND=offline pse kb build incident-kb`" in message
    assert manifest.read_bytes() == before  # refused, not re-embedded behind the search
    with pytest.raises(UserError, match="cannot be compared"):  # a run stops before it starts
        RunKnowledge(folder, Settings(), query="pool")
    rebuilt = KnowledgeBase(folder, Settings()).build()
    assert rebuilt.previous_embedder == first.embedder and rebuilt.full_rebuild
    assert len(rebuilt.embedded) == 7 and KnowledgeBase(folder, Settings()).search("pool", k=3)
