"""The executor and the AutoGen ToolAgent: routing, policy, budgets, audit, failure handling."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
from autogen_agentchat.messages import TextMessage
from autogen_core import CancellationToken

from pse.config import Settings
from pse.events import ToolCallRecord
from pse.exceptions import ToolInfrastructureError
from pse.protocol import ParamSpec, parse_tool_results, render_tool_calls
from pse.toolagent import Policy, ToolAgent, ToolExecutor, render_tool_catalog
from pse.tools import ToolOutcome, ToolSpec, builtin_tools


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "a.txt").write_text("alpha\n")
    return root


def executor(ws: Path, **kw: object) -> ToolExecutor:
    settings = Settings(sandbox="fallback", tool_calls_per_cycle=2, tool_output_limit=400, tool_timeout_s=20)
    return ToolExecutor(ws, settings, **kw)  # type: ignore[arg-type]


def request(*calls: tuple[str, dict[str, str]]) -> str:
    return "Let me look.\n" + render_tool_calls(list(calls))


async def test_results_and_audit_for_a_mixed_batch(ws: Path) -> None:
    seen: list[ToolCallRecord] = []
    ex = executor(ws, on_record=seen.append)
    text = request(
        ("write_file", {"path": "q.py", "content": "x = 1 < 2\n"}),
        ("bash", {"command": "ls"}),
        ("read_file", {"path": "../etc/passwd"}),
        ("nope", {}),
        ("read_file", {"path": "q.py"}),
    )
    batch = await ex.execute("Specialist", text)
    requester, items = parse_tool_results(batch.text)
    assert requester == "Specialist"
    assert [(i.index, i.name, i.status) for i in items] == [
        (1, "write_file", "ok"), (2, "bash", "denied"), (3, "read_file", "denied"), (4, "nope", "error"),
        (5, "read_file", "ok"),
    ]  # fmt: skip
    assert items[1].output == "Specialist may not call bash (policy: policy.default_deny)"
    assert items[4].output == "x = 1 < 2\n"
    assert [(r.decision, r.rule) for r in batch.records] == [
        ("allowed", "roles.Specialist.write_file"), ("denied", "policy.default_deny"), ("denied", "sandbox.path"),
        ("denied", "protocol.unknown_tool"), ("allowed", "roles.Specialist.read_file"),
    ]  # fmt: skip
    assert seen == list(batch.records) == ex.records
    assert (ws / "q.py").read_text() == "x = 1 < 2\n"


async def test_budget_per_role_per_tool_per_cycle(ws: Path) -> None:
    ex = executor(ws)
    three = request(*[("read_file", {"path": "a.txt"})] * 3)
    batch = await ex.execute("Planner", three)
    assert [r.status for r in batch.records] == ["ok", "ok", "denied"]
    assert batch.records[2].rule == "budget.Planner.read_file"
    assert "used all 2 read_file calls of this cycle" in batch.records[2].output
    other = await ex.execute("Evaluator", request(("read_file", {"path": "a.txt"})))
    assert other.records[0].status == "ok"  # budgets are per role
    ex.new_cycle()
    assert [r.status for r in (await ex.execute("Planner", three)).records] == ["ok", "ok", "denied"]


async def test_message_without_tool_calls_gets_an_explanatory_error(ws: Path) -> None:
    batch = await executor(ws).execute("Evaluator", "I have finished reviewing.")
    (record,) = batch.records
    assert record.rule == "protocol.no_tool_calls" and record.status == "error"
    assert "holds no <tool_calls> block" in parse_tool_results(batch.text)[1][0].output


async def test_output_is_truncated_for_the_role_and_marked(ws: Path) -> None:
    (ws / "big.txt").write_text("".join(f"{i:05d}\n" for i in range(5000)))
    batch = await executor(ws).execute("Planner", request(("read_file", {"path": "big.txt"})))
    record = batch.records[0]
    assert record.truncated is True and len(record.output) <= 400
    assert record.output.startswith("00000\n") and record.output.endswith("04999\n")
    assert "[… truncated " in parse_tool_results(batch.text)[1][0].output


async def test_read_only_roles_cannot_change_the_workspace_through_the_agent(ws: Path) -> None:
    ex = executor(ws)
    batch = await ex.execute(
        "Planner", request(("bash", {"command": "echo x > a.txt; rm -f a.txt; touch b"}))
    )
    assert batch.records[0].sandbox == "fallback-copy"
    assert sorted(p.name for p in ws.iterdir()) == ["a.txt"] and (ws / "a.txt").read_text() == "alpha\n"


async def test_event_loop_is_not_blocked_while_a_tool_runs(ws: Path) -> None:
    ex = executor(ws)
    task = asyncio.create_task(ex.execute("Evaluator", request(("bash", {"command": "sleep 1"}))))
    await asyncio.sleep(0.2)
    assert not task.done()  # a blocking executor would have finished the whole call before this line ran
    batch = await task
    assert batch.records[0].status == "ok"


async def test_tool_agent_answers_only_the_last_message(ws: Path) -> None:
    agent = ToolAgent(executor(ws))
    older = TextMessage(source="Specialist", content=request(("write_file", {"path": "x", "content": "1"})))
    last = TextMessage(source="Evaluator", content=request(("read_file", {"path": "a.txt"})))
    response = await agent.on_messages([older, last], CancellationToken())
    message = response.chat_message
    assert isinstance(message, TextMessage) and message.source == "ToolAgent"
    requester, items = parse_tool_results(message.content)
    assert requester == "Evaluator" and [(i.name, i.status, i.output) for i in items] == [
        ("read_file", "ok", "alpha\n")
    ]
    assert not (ws / "x").exists()
    assert agent.produced_message_types == (TextMessage,)
    await agent.on_reset(CancellationToken())


@pytest.mark.parametrize("parallel", [1, 4])
async def test_a_crashing_tool_never_raises_into_the_chat_but_is_surfaced(ws: Path, parallel: int) -> None:
    def broken(ctx: object, query: str, k: str) -> ToolOutcome:
        raise RuntimeError("index file corrupt")

    registry = builtin_tools()
    registry.register(
        ToolSpec("search_knowledge", "Search.", (ParamSpec("query"), ParamSpec("k", False, "5")), broken)
    )
    settings = Settings(sandbox="fallback", tool_parallel_calls=parallel)
    ex = ToolExecutor(ws, settings, registry=registry)
    agent = ToolAgent(ex)
    text = request(("search_knowledge", {"query": "sorting"}), ("read_file", {"path": "a.txt"}))
    response = await agent.on_messages([TextMessage(source="Planner", content=text)], CancellationToken())
    _, items = parse_tool_results(response.chat_message.content)  # type: ignore[union-attr]
    assert "index file corrupt" in items[0].output
    if parallel == 1:  # one after another: nothing runs after the machinery failed
        assert [(i.name, i.status) for i in items] == [("search_knowledge", "error"), ("read_file", "error")]
        assert "not run" in items[1].output
    else:  # the read ran beside the failing call (read-only, no side effect) and keeps its result
        assert [(i.name, i.status) for i in items] == [("search_knowledge", "error"), ("read_file", "ok")]
    assert isinstance(ex.infrastructure_error, ToolInfrastructureError)
    assert "search_knowledge failed: RuntimeError: index file corrupt" in str(ex.infrastructure_error)


async def test_agent_survives_an_executor_bug(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ex = executor(ws)

    async def explode(requester: str, text: str) -> None:
        raise KeyError("boom")

    monkeypatch.setattr(ex, "execute", explode)
    response = await ToolAgent(ex).on_messages(
        [TextMessage(source="Planner", content="x")], CancellationToken()
    )
    assert "the ToolAgent failed, not your request" in response.chat_message.content  # type: ignore[union-attr]
    assert ex.infrastructure_error is not None


def test_forced_bwrap_without_bwrap_fails_at_construction(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("pse.sandbox._runner.bwrap_problem", lambda *_: "bwrap is not installed")
    with pytest.raises(ToolInfrastructureError, match="PSE_SANDBOX=bwrap"):
        ToolExecutor(ws, Settings(sandbox="bwrap"))


def test_catalog_lists_registered_granted_tools(ws: Path) -> None:
    policy = Policy.default(Settings()).with_overrides({"Planner": {"bash": "deny"}})
    text = render_tool_catalog("Planner", policy)
    lines = text.splitlines()
    assert lines[0].startswith("Tools Planner may request")
    assert [line.split("(")[0] for line in lines[1:]] == [
        "- read_file",
        "- list_files",
    ]  # no bash; no search yet
    assert "[read-only, 30/cycle]" in lines[1]


async def test_execute_sync_matches_execute_on_the_calling_thread(ws: Path) -> None:
    threads: list[str] = []

    def where(ctx: object) -> ToolOutcome:
        threads.append(threading.current_thread().name)
        return ToolOutcome("ok", "ran")

    registry = builtin_tools()
    registry.register(ToolSpec("where", "Say which thread runs tools.", (), where))
    policy = Policy.default(Settings(), registry).with_overrides({"Evaluator": {"where": "read-only"}})
    text = request(
        ("list_files", {}), ("where", {}), ("write_file", {"path": "x", "content": "1"}),
        ("read_file", {"path": "../outside"}), ("nope", {}),
    )  # fmt: skip
    on_pool = await executor(ws, registry=registry, policy=policy).execute("Evaluator", text)
    here = executor(ws, registry=registry, policy=policy).execute_sync("Evaluator", text)
    assert here.text == on_pool.text
    timeless = [{"at", "ms"}] * len(here.records)
    assert [r.model_dump(exclude=x) for r, x in zip(here.records, timeless, strict=True)] == [
        r.model_dump(exclude=x) for r, x in zip(on_pool.records, timeless, strict=True)
    ]
    assert [(r.status, r.rule) for r in here.records] == [
        ("ok", "roles.Evaluator.list_files"), ("ok", "task.Evaluator.where"), ("denied", "policy.default_deny"),
        ("denied", "sandbox.path"), ("error", "protocol.unknown_tool"),
    ]  # fmt: skip
    assert threads[0].startswith("pse-tool") and threads[1] == threading.current_thread().name


async def test_a_failure_outside_any_tool_is_kept_and_stops_every_later_call(ws: Path) -> None:
    ex = executor(ws)
    first, second = ToolInfrastructureError("sandbox gone"), ToolInfrastructureError("later")
    ex.report_infrastructure_error(first)
    ex.report_infrastructure_error(second)
    assert ex.infrastructure_error is first
    two = request(*[("read_file", {"path": "a.txt"})] * 2)
    for _ in range(2):  # calls not run give their budget (2 per cycle) back: never a budget denial
        batch = await ex.execute("Planner", two)
        assert [(r.decision, r.rule, r.status, r.output) for r in batch.records] == [
            ("allowed", "roles.Planner.read_file", "error", "not run: the tool machinery failed on an earlier request")
        ] * 2  # fmt: skip


async def test_a_request_sent_again_with_nothing_written_since_says_so(ws: Path) -> None:
    """The 1.5B Evaluator sent read_file + run_pytest four times over in one cycle, until the turn cap:
    its calls still run, and the results of a repeat say that nothing new can come of it."""
    from pse.toolagent._repeats import REPEAT_NOTE

    ex = ToolExecutor(ws, Settings(sandbox="fallback"))
    look = request(("read_file", {"path": "a.txt"}), ("list_files", {"path": "."}))
    other = request(("read_file", {"path": "a.txt"}))

    async def notes(role: str, text: str) -> list[str]:
        batch = await ex.execute(role, text)
        assert all(r.status == "ok" for r in batch.records)  # run, whatever the note says
        # never inside a result: a read_file's result is the file's text, word for word
        assert all(REPEAT_NOTE not in i.output for i in parse_tool_results(batch.text)[1])
        return [REPEAT_NOTE] if batch.text.endswith("</tool_results>\n" + REPEAT_NOTE) else []

    assert await notes("Evaluator", look) == []
    assert await notes("Evaluator", other) == []  # a different request
    assert await notes("Planner", look) == []  # another role's first
    assert await notes("Evaluator", look) == [REPEAT_NOTE]
    assert await notes("Evaluator", other) == [REPEAT_NOTE]
    # A write (by any role) may change what the same request finds: no note until it is repeated again.
    await ex.execute("Specialist", request(("write_file", {"path": "b.txt", "content": "beta\n"})))
    assert await notes("Evaluator", look) == []
    assert await notes("Evaluator", look) == [REPEAT_NOTE]
    ex.new_cycle()  # a new cycle starts afresh
    assert await notes("Evaluator", look) == []
