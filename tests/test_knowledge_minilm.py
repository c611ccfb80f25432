"""The MiniLM backend (the `embeddings` extra): offline from its package, chosen by auto, and good enough.

Skipped, with the reason, where the extra is not installed; `make setup` and CI install it. The model
loads in seconds and embeds the 60-document labelled set in about 20 s on 2 cores: one module-wide
index serves the quality tests.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cli_support import pse
from pse.config import Settings
from pse.knowledge import KnowledgeBase, MiniLMEmbedder, evaluate_retrieval, load_queries, minilm_missing
from pse.knowledge._minilm import model_dir
from pse.tasks import TaskRegistry

MISSING = minilm_missing()
pytestmark = pytest.mark.skipif(
    MISSING is not None,
    reason=f"the embeddings extra is not installed ({MISSING}): pip install -e '.[dev,embeddings]' "
    "(make setup and CI install it)",
)

INCIDENT = TaskRegistry.discover().get("incident-review")
OPS = Path(__file__).parent / "data" / "kb-ops"
HF_SWITCHES = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_DISABLE_TELEMETRY")


def _own_task(tmp_path: Path) -> Path:
    tasks = tmp_path / "tasks"
    shutil.copytree(INCIDENT.dir, tasks / "incident-kb", ignore=shutil.ignore_patterns(".index"))
    (tasks / "registry.toml").write_text('[tasks.incident-kb]\npath = "incident-kb"\n')
    return tasks


@pytest.fixture
def no_network_at_all(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Stricter than conftest's guard: no socket may connect anywhere, loopback included, nor resolve."""
    attempts: list[Any] = []

    def refuse(*args: Any, **kwargs: Any) -> Any:
        attempts.append(args[1:] or args)
        raise OSError("network access is refused in this test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    return attempts


def test_a_fresh_checkout_builds_with_minilm_and_touches_no_network(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    no_network_at_all: list[Any],
) -> None:
    monkeypatch.delenv("PSE_KB_BACKEND")  # the default, auto, as a new user has it
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # nothing unpacked yet
    for name in HF_SWITCHES:
        monkeypatch.delenv(name, raising=False)
    tasks = _own_task(tmp_path)
    code, out, err = pse(monkeypatch, capsys, "kb", "build", "incident-kb", "--tasks-dir", str(tasks))
    said = " ".join(out.split())
    assert code == 0, err
    assert "backend minilm: minilm:all-MiniLM-L6-v2@" in said
    assert "(PSE_KB_BACKEND=auto: the embeddings extra is installed)" in said
    assert "Loading" not in err and "%|" not in err  # no progress bars on the CLI's stderr
    manifest = json.loads(
        (tasks / "incident-kb" / "knowledge" / ".index" / "minilm" / "manifest.json").read_text()
    )
    assert manifest["backend"] == "minilm" and manifest["dim"] == 384 and len(manifest["files"]) == 7
    unpacked = list((tmp_path / "cache" / "pse" / "models").iterdir())
    assert [p.name.startswith("all-MiniLM-L6-v2-") for p in unpacked] == [True]
    assert (unpacked[0] / "model.safetensors").is_file()
    assert no_network_at_all == []
    assert not any(name in os.environ for name in HF_SWITCHES)  # the offline switches were put back
    code, out, _ = pse(
        monkeypatch, capsys, "kb", "search", "incident-kb", "staff could not pay by card", "--json",
        "--tasks-dir", str(tasks),
    )  # fmt: skip
    assert code == 0 and json.loads(out)["results"][0]["citation"]["file"].startswith("postmortem-2026-03")
    assert no_network_at_all == []


def test_each_backend_keeps_its_own_index_so_switching_never_searches_the_other(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """`make test` (offline, as conftest pins) then `make review` (auto: MiniLM with the extra) once
    refused the offline index; now each backend has its folder, and going back re-embeds nothing."""
    tasks = _own_task(tmp_path)
    index = tasks / "incident-kb" / "knowledge" / ".index"
    code, _, _ = pse(monkeypatch, capsys, "kb", "build", "incident-kb", "--tasks-dir", str(tasks))
    assert code == 0  # with the offline backend conftest pins
    offline = (index / "offline" / "manifest.json").read_bytes()
    monkeypatch.delenv("PSE_KB_BACKEND")
    code, out, err = pse(
        monkeypatch, capsys, "kb", "search", "incident-kb", "pool", "--tasks-dir", str(tasks)
    )
    assert code == 0 and "1. " in out  # MiniLM built its own index, beside the offline one, and said so
    assert "built the minilm index of incident-kb first" in " ".join(err.split())
    assert json.loads((index / "minilm" / "manifest.json").read_text())["embedder"].startswith("minilm:")
    monkeypatch.setenv("PSE_KB_BACKEND", "offline")
    code, out, _ = pse(monkeypatch, capsys, "kb", "build", "incident-kb", "--tasks-dir", str(tasks), "--json")
    assert code == 0 and json.loads(out)["embedded"] == []  # the offline index was there all along
    assert (index / "offline" / "manifest.json").read_bytes() == offline


def test_the_model_unpacks_once_and_falls_back_to_a_private_temp_folder(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    first = model_dir(tmp_path / "cache")
    assert model_dir(tmp_path / "cache") == first and (first / ".unpacked").is_file()
    assert [p.name for p in first.parent.iterdir()] == [first.name]  # no staging folder left behind
    (tmp_path / "a-file").write_text("not a folder")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    fallback = model_dir(tmp_path / "a-file")
    assert fallback.parent == tmp_path / "tmp" / f"pse-models-{os.getuid()}"
    assert (fallback / "model.safetensors").is_file()


def test_embeddings_are_unit_vectors_that_match_paraphrases(tmp_path: Path) -> None:
    embedder = MiniLMEmbedder(cache_root=tmp_path)
    rows = embedder.embed(
        [
            "machines had the wrong time and sign-ins failed",
            "clocks of the auth hosts drifted and tokens were rejected as not yet valid",
            "the disk is full because old log files were never rotated",
        ]
    )
    assert rows.shape == (3, 384) and rows.dtype == np.float32
    assert np.allclose(np.linalg.norm(rows, axis=1), 1.0, atol=1e-5)
    assert float(rows[0] @ rows[1]) > float(rows[0] @ rows[2]) + 0.2
    again = embedder.embed(["machines had the wrong time and sign-ins failed"])[0]
    assert np.allclose(again, rows[0], atol=1e-5)  # alone or in a padded batch: the same vector


@pytest.fixture(scope="module")
def ops_kb(tmp_path_factory: pytest.TempPathFactory) -> KnowledgeBase:
    folder = tmp_path_factory.mktemp("ops") / "knowledge"
    shutil.copytree(OPS / "knowledge", folder)
    kb = KnowledgeBase(folder, Settings(kb_backend="minilm"))
    assert kb.build().backend == "minilm"
    return kb


def test_held_out_paraphrases_are_found_and_specific_questions_stay_found(ops_kb: KnowledgeBase) -> None:
    """The issue's bar, on the test split (never tuned on): paraphrases ≥ 0.8, the others ≥ 0.95."""
    held_out = [q for q in load_queries(OPS / "queries.json") if q.split == "test"]
    scores = {k: v.recall_at_3 for k, v in evaluate_retrieval(ops_kb, held_out).items()}
    assert scores["paraphrase"] >= 0.8 and scores["specific"] >= 0.95 and scores["keyword"] >= 0.95, scores
