"""Knowledge base: build, incremental rebuild (exact re-embed counts), citations, search, tool, injection."""

from __future__ import annotations

import itertools
import json
import shutil
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from pse.config import Settings
from pse.exceptions import UserError
from pse.knowledge import (
    HashingEmbedder,
    KnowledgeBase,
    LabelledQuery,
    RunKnowledge,
    evaluate_retrieval,
    load_queries,
)
from pse.knowledge._chunks import Document, chunk_document
from pse.tasks import TaskRegistry
from pse.toolagent import Policy, ToolExecutor

INCIDENT = TaskRegistry.discover().get("incident-review")


class CountingEmbedder(HashingEmbedder):
    """The offline embedder, counting every text it is asked to embed."""

    def __init__(self) -> None:
        super().__init__()
        self.texts: list[str] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:  # type: ignore[override]
        self.texts.extend(texts)
        return super().embed(texts)


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "knowledge"
    shutil.copytree(INCIDENT.knowledge_dir, folder, ignore=shutil.ignore_patterns(".index"))  # type: ignore[arg-type]
    return folder


def _lines(folder: Path, file: str, start: int, end: int) -> str:
    return "\n".join((folder / file).read_text().splitlines()[start - 1 : end]).strip()


def test_chunks_keep_whole_lines_overlap_and_their_section() -> None:
    body = "# Title\n\nintro line\n\n## Part A\n" + "".join(f"alpha line {i} of part a\n" for i in range(30))
    chunks = chunk_document(Document(Path("a.md"), "a.md", body.encode()), chunk_chars=200, overlap=50)
    lines = body.splitlines()
    assert chunks[0].heading == "Title" and (chunks[0].start_line, chunks[0].end_line) == (1, 4)
    part = [c for c in chunks if c.heading == "Title › Part A"]
    assert len(part) == len(chunks) - 1 >= 3
    for chunk in chunks:
        assert chunk.text == "\n".join(lines[chunk.start_line - 1 : chunk.end_line]).strip()
    for before, after in itertools.pairwise(part):
        assert after.start_line <= before.end_line  # overlap: the next chunk repeats lines
        assert after.start_line > before.start_line  # and always moves forward


def test_build_indexes_supported_files_and_skips_the_rest(tmp_path: Path) -> None:
    folder = tmp_path / "knowledge"
    folder.mkdir()
    (folder / "a.md").write_text("# A\n\nconnection pool exhaustion\n")
    (folder / "notes.txt").write_text("plain text notes about retries\n")
    (folder / "slides.pdf").write_bytes(b"%PDF-1.4")
    (folder / ".hidden.md").write_text("# hidden\n")
    report = KnowledgeBase(folder, Settings()).build()
    assert (report.files, report.chunks, report.embedded, report.full_rebuild) == (
        2,
        2,
        ["a.md", "notes.txt"],
        True,
    )
    assert report.skipped == ["slides.pdf (unsupported kind; index .md, .txt or .rst files)"]
    index = folder / ".index" / "offline"
    assert sorted(p.name for p in index.iterdir()) == [
        ".gitignore",
        ".lock",
        "chunks.json",
        "manifest.json",
        "vectors.faiss",
    ]
    assert (index / ".gitignore").read_text() == "*\n"
    manifest = json.loads((index / "manifest.json").read_text())
    assert set(manifest["files"]) == {"a.md", "notes.txt"} and manifest["embedder"].startswith(
        "offline:hashing"
    )


def test_rebuild_reembeds_exactly_the_changed_and_new_files(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    embedder = CountingEmbedder()
    kb = KnowledgeBase(folder, Settings(), embedder=embedder)
    first = kb.build()
    assert len(first.embedded) == 7 and len(embedder.texts) == first.chunks == first.chunks_embedded

    embedder.texts.clear()
    again = kb.build()
    assert (again.embedded, again.removed, len(again.reused), again.changed) == ([], [], 7, False)
    assert embedder.texts == []

    with (folder / "db-pool-tuning.md").open("a") as handle:
        handle.write("\n## Addendum\n\nThe replica pool holds 20 connections.\n")
    (folder / "new-note.md").write_text("# New note\n\nCheck the replica lag first.\n")
    (folder / "runbook-release-rollback.md").unlink()
    third = kb.build()
    assert third.embedded == ["db-pool-tuning.md", "new-note.md"]
    assert third.removed == ["runbook-release-rollback.md"] and len(third.reused) == 5
    changed_chunks = [c for c in kb.search("replica", k=20) if c.citation.file in third.embedded]
    assert changed_chunks  # the new text is searchable
    assert len(embedder.texts) == third.chunks_embedded + 1  # + the query just searched
    assert {t.split("\n")[0].split(" › ")[0] for t in embedder.texts[:-1]} == {
        "Tuning note: payment-api database connection pool",
        "New note",
    }
    assert not any("release" in h.citation.file for h in kb.search("rollback of a release", k=20))


def test_another_embedder_or_chunking_rebuilds_everything(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    KnowledgeBase(folder, Settings()).build()
    other = KnowledgeBase(folder, Settings(), embedder=HashingEmbedder(dim=1024)).build()
    assert other.full_rebuild and len(other.embedded) == 7 and other.reused == []
    rechunked = KnowledgeBase(
        folder, Settings(kb_chunk_chars=400, kb_chunk_overlap=100), embedder=HashingEmbedder(dim=1024)
    ).build()
    assert rechunked.full_rebuild and rechunked.chunks > other.chunks


def test_search_builds_a_missing_index_and_cites_exact_lines(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    kb = KnowledgeBase(folder, Settings())
    assert not (folder / ".index").exists()
    hits = kb.search("ledger-reconcile batch job holds the API's pool", k=3)
    assert (folder / ".index" / "offline" / "manifest.json").is_file()
    assert [h.rank for h in hits] == [1, 2, 3]
    assert hits[0].citation.file == "db-pool-tuning.md" and hits[0].citation.heading.endswith("Batch jobs")
    assert hits[0].score == 1.0 and hits[0].score >= hits[1].score >= hits[2].score > 0
    for hit in hits:
        c = hit.citation
        assert hit.text == _lines(folder, c.file, c.start_line, c.end_line)
        assert c.label == f"{c.file}:{c.start_line}-{c.end_line}"


def test_hybrid_weight_picks_lexical_or_vector_scores(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    lexical = KnowledgeBase(folder, Settings(kb_hybrid_weight=0)).search("card network resets", k=5)
    vector = KnowledgeBase(folder, Settings(kb_hybrid_weight=1)).search("card network resets", k=5)
    assert all(h.score == h.lexical for h in lexical) and all(h.score == h.vector for h in vector)
    assert lexical[0].citation.file == vector[0].citation.file == "postmortem-2026-03-card-network.md"


def test_bad_queries_are_errors_and_an_empty_folder_finds_nothing(tmp_path: Path) -> None:
    empty = tmp_path / "knowledge"
    empty.mkdir()
    kb = KnowledgeBase(empty, Settings())
    assert kb.search("anything", k=3) == []
    with pytest.raises(ValueError, match="query is empty"):
        kb.search("  ", k=3)
    with pytest.raises(ValueError, match="between 1 and 20"):
        kb.search("pool", k=0)
    with pytest.raises(UserError, match="does not exist"):
        KnowledgeBase(tmp_path / "missing", Settings())


def test_the_index_is_never_written_through_a_link_out_of_the_folder(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (folder / ".index").symlink_to(outside)
    with pytest.raises(UserError, match="outside the knowledge folder"):
        KnowledgeBase(folder, Settings()).build()
    assert list(outside.iterdir()) == []


def test_tool_answers_with_citations_and_obeys_the_policy(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    settings = Settings()
    knowledge = RunKnowledge(folder, settings)
    policy = Policy.default(settings, knowledge.registry).with_overrides(
        {"Specialist": {"search_knowledge": "deny"}}
    )
    executor = ToolExecutor(workspace, settings, policy, registry=knowledge.registry)
    call = '<tool_calls><invoke name="search_knowledge"><parameter name="query">{q}</parameter><parameter name="k">{k}</parameter></invoke></tool_calls>'
    ok = executor.execute_sync("Planner", call.format(q="log shipper restart gap", k="2")).records[0]
    assert (ok.decision, ok.status, ok.rule) == ("allowed", "ok", "roles.Planner.search_knowledge")
    assert ok.facts["query"] == "log shipper restart gap" and ok.facts["k"] == 2
    cites = ok.facts["citations"]
    assert len(cites) == 2 and cites[0]["file"] == "gateway-log-pipeline.txt"
    assert (
        f"[1] gateway-log-pipeline.txt:{cites[0]['start_line']}-{cites[0]['end_line']} (score " in ok.output
    )
    denied = executor.execute_sync("Specialist", call.format(q="pool", k="2")).records[0]
    assert (denied.decision, denied.status, denied.rule) == (
        "denied",
        "denied",
        "task.Specialist.search_knowledge",
    )
    bad = executor.execute_sync("Evaluator", call.format(q="pool", k="many")).records[0]
    assert bad.status == "error" and "k must be a whole number" in bad.output
    assert executor.infrastructure_error is None


def test_without_a_knowledge_folder_the_tool_is_not_registered() -> None:
    knowledge = RunKnowledge(None, Settings(kb_inject_top_k=3), query="anything")
    assert "search_knowledge" not in knowledge.registry and knowledge.brief("msg\n") == "msg\n"


def test_injection_is_deterministic_relative_and_filed_in_cycle_one(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    settings = Settings(kb_inject_top_k=2)
    goal = INCIDENT.config.goal
    first, second = RunKnowledge(folder, settings, query=goal), RunKnowledge(folder, settings, query=goal)
    brief = first.brief("# Task\n")
    assert brief == second.brief("# Task\n") and brief.startswith("# Task\n\n## Knowledge (")
    assert str(tmp_path) not in brief and brief.count("\n- [") == 2
    assert first.injected is not None and first.injected[0] == goal.strip()
    assert [c["file"] in brief for c in first.injected[1]] == [True, True]
    assert RunKnowledge(folder, settings, query=None).injected is None  # resumed runs inject nothing new


def _chunks_of(name: str, body: str) -> list[tuple[int, int, str]]:
    document = Document(Path(name), name, body.encode())
    return [(c.start_line, c.end_line, c.heading) for c in chunk_document(document, 900, 200)]


def test_a_heading_stays_with_its_body_and_its_parents() -> None:
    body = (
        "# Runbook\n\nintro\n\n## Diagnosis\n\n### Kubernetes\n\nkubectl describe pod\n\n"
        "Setext title\n------------\n\nbody under it\n\n## Empty\n\n"
    )
    # `## Diagnosis` has no body of its own: no chunk of just a heading, its path goes to `### Kubernetes`.
    assert _chunks_of("a.md", body) == [
        (1, 4, "Runbook"),
        (7, 10, "Runbook › Diagnosis › Kubernetes"),
        (11, 15, "Runbook › Setext title"),
    ]
    rst = "=======\nManual\n=======\n\nintro\n\nInstall\n-------\n\npip\n\nOffline\n~~~~~~~\n\nno net\n\nUse\n---\n\nrun\n"
    assert _chunks_of("m.rst", rst) == [
        (1, 6, "Manual"),
        (7, 11, "Manual › Install"),
        (12, 16, "Manual › Install › Offline"),
        (17, 20, "Manual › Use"),
    ]
    # Front matter, a `---` that ends a list, and text files are no headings.
    assert _chunks_of("b.md", "---\ntitle: x\n---\n\n# T\n\n- item\n---\n") == [(1, 4, ""), (5, 8, "T")]
    assert _chunks_of("c.txt", "Title\n=====\n\nbody\n") == [(1, 4, "")]


def test_a_long_section_carries_its_heading_path_into_every_chunk() -> None:
    body = "# Guide\n\n## Part\n\n### Step\n\n" + "".join(
        f"line {i} of the step text here\n" for i in range(60)
    )
    chunks = chunk_document(Document(Path("g.md"), "g.md", body.encode()), chunk_chars=300, overlap=60)
    assert len(chunks) >= 5 and {c.heading for c in chunks} == {"Guide › Part › Step"}
    assert all(c.searchable.startswith("Guide › Part › Step\n") for c in chunks)


def test_evaluation_counts_recall_mrr_and_misses_per_type(tmp_path: Path) -> None:
    folder = tmp_path / "knowledge"
    folder.mkdir()
    (folder / "pool.md").write_text("# Pool\n\n## Signs\n\nactive equals pool_max and waiting grows\n")
    (folder / "cert.md").write_text("# Certificates\n\nrenew the TLS certificate before it expires\n")
    queries = [
        LabelledQuery(query="pool_max waiting", type="keyword", relevant=["pool.md"]),
        LabelledQuery(query="TLS certificate", type="keyword", relevant=[{"file": "cert.md"}]),
        LabelledQuery(query="pool_max", type="specific", relevant=[{"file": "pool.md", "section": "Nope"}]),
        LabelledQuery(query="renew certificate", type="specific", relevant=["pool.md", "cert.md"]),
    ]
    scores = evaluate_retrieval(KnowledgeBase(folder, Settings()), queries)
    assert {k: v.as_dict() for k, v in scores.items()} == {
        "all": {"queries": 4, "recall@3": 0.625, "mrr@10": 0.75, "missed@10": 1},
        "keyword": {"queries": 2, "recall@3": 1.0, "mrr@10": 1.0, "missed@10": 0},
        "specific": {"queries": 2, "recall@3": 0.25, "mrr@10": 0.5, "missed@10": 1},
    }


def test_the_labelled_set_is_split_by_neighbour_pair_and_covers_every_document() -> None:
    data = Path(__file__).parent / "data" / "kb-ops"
    queries = load_queries(data / "queries.json")
    files = sorted(p.name for p in (data / "knowledge").iterdir())
    assert len(files) == 60 and len(queries) == 180
    assert sorted({t.file for q in queries for t in q.relevant}) == files
    for split in ("dev", "test"):
        kinds = [q.type for q in queries if q.split == split]
        assert {k: kinds.count(k) for k in set(kinds)} == {"paraphrase": 30, "specific": 30, "keyword": 30}
    dev = {t.file for q in queries if q.split == "dev" for t in q.relevant}
    assert dev.isdisjoint({t.file for q in queries if q.split == "test" for t in q.relevant})
