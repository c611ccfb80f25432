"""Budgets that hold mid-call, usage counted for every call, context windows, reasoning kept apart.

Against a loopback stand-in of the OpenAI API that answers with the code-delivery cassette's turns,
reports usage, and can be slow on purpose — the real HTTP client, SDK and AutoGen code all run.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from pse.config import load_settings
from pse.engine import load_trace
from pse.exceptions import ContextWindowError
from pse.models import SETTLE_S
from pse.runner import prepare_run, run_to_end
from pse.tasks import TaskRegistry
from standins import ChatStandIn, Reply

_TURNS = json.loads(TaskRegistry.discover(None).get("code-delivery").cassette_path.read_text())["turns"]  # type: ignore[union-attr]


def _openai(stand_in: ChatStandIn, tmp_path: Path, **settings: Any) -> Any:
    return load_settings(
        provider="openai", model="m-test", base_url=stand_in.url, runs_dir=tmp_path / "runs",
        model_backoff_s=0.01, **settings,
    )  # fmt: skip


async def test_a_slow_model_stops_at_the_run_limit_and_every_answered_request_is_counted(
    tmp_path: Path,
) -> None:
    with ChatStandIn("openai") as stand_in:
        stand_in.script(
            *(Reply(content=t["content"], usage=(500 + i, 50 + i), delay_s=0.9) for i, t in enumerate(_TURNS))
        )
        started = time.monotonic()
        summary = await run_to_end(prepare_run("code-delivery", _openai(stand_in, tmp_path, run_timeout_s=3)))
        elapsed = time.monotonic() - started
        time.sleep(1.2)  # let the abandoned request finish: a hung-up client gets no answer
        delivered = list(stand_in.delivered)
        probes = list(stand_in.probes_delivered)
    assert (summary.outcome, summary.outcome_reason) == (
        "TIMEOUT",
        "run wall-clock limit reached (PSE_RUN_TIMEOUT_S)",
    )
    assert elapsed < 3 + 2, f"a 3 s run took {elapsed:.1f} s"
    trace = load_trace(Path(summary.trace))
    by_role = trace.tokens.by_role.values()
    reported = sum(t.prompt + t.completion for t in by_role) - sum(t.estimated for t in by_role)
    served = probes + delivered  # the grammar-support probe is a call the server answered too (issue 47)
    assert probes == [(3, 1)] and reported == sum(p + c for p, c in served)  # every answered request, exactly
    # The request the deadline stopped was answered 0.9 s into it, while the run settled its calls
    # (SETTLE_S): the server served it, so it counts in full, not as an estimate (issue 29). A call still
    # in flight after that is estimated: test_a_call_still_in_flight_when_the_run_has_settled_is_an_estimate.
    assert sum(t.estimated for t in by_role) == 0
    assert sum(t.calls for t in by_role) == len(served)
    # No model call started after the deadline: the stand-in saw only the calls made before it.
    assert len(stand_in.requests) == len(delivered)


async def test_a_token_budget_that_cannot_cover_the_next_prompt_stops_before_the_call(tmp_path: Path) -> None:
    with ChatStandIn("openai") as stand_in:
        stand_in.script(*(Reply(content=t["content"], usage=(900, 90)) for t in _TURNS))
        summary = await run_to_end(
            prepare_run("code-delivery", _openai(stand_in, tmp_path, token_budget=2500))
        )
        asked = len(stand_in.requests)
    assert summary.outcome == "TIMEOUT"
    assert summary.outcome_reason.startswith("token budget cannot cover the next prompt: 994 used + about")
    assert asked == 1 and summary.tokens.total == 3 + 1 + 990 <= 2500  # the probe's 4 tokens count too


async def test_a_command_running_at_the_deadline_is_stopped_with_it(tmp_path: Path) -> None:
    turns = [dict(t) for t in _TURNS]
    turns[1]["content"] = '<tool_calls><invoke name="write_file"><parameter name="path">x.txt</parameter>' \
        '<parameter name="content">x</parameter></invoke></tool_calls>'  # fmt: skip
    turns[3]["content"] = (
        '<tool_calls><invoke name="bash"><parameter name="command">sleep 60</parameter></invoke></tool_calls>'
    )
    turns[2]["content"] = "<report>x.txt</report>"
    cassette = tmp_path / "slow-tool.json"
    cassette.write_text(json.dumps({"turns": turns}))
    settings = load_settings(
        cassette=cassette, runs_dir=tmp_path / "runs", run_timeout_s=2, tool_timeout_s=60
    )
    started = time.monotonic()
    summary = await run_to_end(prepare_run("code-delivery", settings))
    elapsed = time.monotonic() - started
    assert summary.outcome == "TIMEOUT" and elapsed < 60, "the run waited for sleep 60 to finish"
    sleep = load_trace(Path(summary.trace)).cycles[0].tool_calls[-1]
    assert sleep.tool == "bash" and sleep.status == "timeout"
    assert "the run's wall-clock limit (PSE_RUN_TIMEOUT_S) came" in sleep.output


async def test_a_prompt_over_the_context_window_stops_with_the_right_fixes(tmp_path: Path) -> None:
    with ChatStandIn("openai") as stand_in:
        stand_in.script(*(Reply(content=t["content"]) for t in _TURNS))
        settings = _openai(stand_in, tmp_path, planner_model_context_tokens=900)
        summary = await run_to_end(prepare_run("code-delivery", settings))
        asked = len(stand_in.requests)
    assert summary.outcome == "ERROR" and asked == 0  # refused before anything was sent
    reason = summary.outcome_reason
    assert reason.startswith("ContextWindowError: Planner's prompt does not fit the context window")
    assert "the window is 900" in reason and "PSE_PLANNER_MODEL_CONTEXT_TOKENS" in reason
    assert "PSE_STEP_BUFFER_TOKENS" in reason and "server is up" not in reason


async def test_a_providers_context_length_refusal_is_the_same_error(tmp_path: Path) -> None:
    refusal = "This model's maximum context length is 2048 tokens. However, you requested 3509 tokens."
    with ChatStandIn("openai") as stand_in:
        stand_in.script(Reply(status=400, error=refusal))
        summary = await run_to_end(prepare_run("code-delivery", _openai(stand_in, tmp_path)))
        asked = len(stand_in.requests)
    assert summary.outcome == "ERROR" and asked == 1  # a 400 is never retried
    assert summary.outcome_reason.startswith("ContextWindowError: Planner's prompt does not fit")
    assert "maximum context length is 2048" in summary.outcome_reason
    assert "raise the window" in summary.outcome_reason and "server is up" not in summary.outcome_reason
    assert issubclass(ContextWindowError, Exception)


async def test_reasoning_is_kept_as_thought_and_never_reaches_the_protocol_or_another_role(
    tmp_path: Path,
) -> None:
    thinking = "<think>The plan must name AC4. Secret-ish musing: REASONING-CANARY.</think>\n"
    with ChatStandIn("openai") as stand_in:
        stand_in.script(
            Reply(content=thinking + _TURNS[0]["content"]),
            *(Reply(content=t["content"], reasoning="DeepSeek style REASONING-CANARY-2" if i == 0 else None)
              for i, t in enumerate(_TURNS[1:])),
        )  # fmt: skip
        summary = await run_to_end(prepare_run("code-delivery", _openai(stand_in, tmp_path)))
        bodies = [json.dumps(r.body) for r in stand_in.requests]
    assert summary.outcome == "PASSED"
    messages = load_trace(Path(summary.trace)).cycles[0].messages
    planner, specialist = messages[0], messages[1]
    assert "REASONING-CANARY" in (planner.thought or "") and "<think>" not in planner.content
    assert planner.thought_tokens > 0 and planner.content.startswith("<plan>")
    assert "REASONING-CANARY-2" in (specialist.thought or "")
    assert not any("REASONING-CANARY" in b for b in bodies[1:])  # no other role (nor the next turn) saw it


async def test_an_answer_served_while_the_run_stops_is_counted_in_full(tmp_path: Path) -> None:
    """Issue 29: the deadline stopped the Specialist's call at 1 s while the server was answering it; the
    answer came 0.4 s later, before the run had settled its calls (SETTLE_S), so its tokens are the
    server's own, not an estimate, and the reply is kept as a late message."""
    with ChatStandIn("openai") as stand_in:
        stand_in.script(
            Reply(content=_TURNS[0]["content"], usage=(1500, 300), delay_s=0.1),
            Reply(content=_TURNS[1]["content"], usage=(1700, 2100), delay_s=0.9),
        )
        started = time.monotonic()
        summary = await run_to_end(prepare_run("code-delivery", _openai(stand_in, tmp_path, run_timeout_s=1)))
        elapsed = time.monotonic() - started
        delivered = list(stand_in.delivered)
    assert (summary.outcome, summary.outcome_reason) == (
        "TIMEOUT",
        "run wall-clock limit reached (PSE_RUN_TIMEOUT_S)",
    )
    assert delivered == [(1500, 300), (1700, 2100)] and elapsed < 1 + SETTLE_S + 2
    trace = load_trace(Path(summary.trace))
    specialist = trace.tokens.by_role["Specialist"]
    assert (specialist.prompt, specialist.completion, specialist.estimated, specialist.calls) == (
        1700,
        2100,
        0,
        1,
    )
    assert trace.tokens.total == 3 + 1 + 1500 + 300 + 1700 + 2100  # the probe's tokens too
    late = [m for m in trace.cycles[0].messages if m.late]
    assert [(m.source, m.content) for m in late] == [("Specialist", _TURNS[1]["content"])]


async def test_a_call_still_in_flight_when_the_run_has_settled_is_an_estimate(tmp_path: Path) -> None:
    with ChatStandIn("openai") as stand_in:
        stand_in.script(
            Reply(content=_TURNS[0]["content"], usage=(1500, 300), delay_s=0.1),
            Reply(content=_TURNS[1]["content"], usage=(1700, 2100), delay_s=1 + SETTLE_S + 4),
        )
        started = time.monotonic()
        summary = await run_to_end(prepare_run("code-delivery", _openai(stand_in, tmp_path, run_timeout_s=1)))
        elapsed = time.monotonic() - started
    # The run does not wait for that answer (due 4 s after it settled): it ends once SETTLE_S has passed.
    assert summary.outcome == "TIMEOUT" and elapsed < 1 + SETTLE_S + 2
    specialist = load_trace(Path(summary.trace)).tokens.by_role["Specialist"]
    assert (
        specialist.completion == 0 and specialist.estimated == specialist.prompt > 0 and specialist.calls == 1
    )


class _Capture:
    """An inner client that keeps what it was sent (for `ContextWindowClient`)."""

    def __init__(self) -> None:
        self.sent: list[Any] = []

    async def create(self, messages: Any, **_: Any) -> Any:
        from autogen_core.models import CreateResult, RequestUsage

        self.sent = list(messages)
        return CreateResult(finish_reason="stop", content="ok", usage=RequestUsage(0, 0), cached=False)


async def test_a_phase_that_outgrows_the_window_goes_on_with_its_earlier_tool_output_left_out() -> None:
    """The 1.5B model read three data files of incident-review and its next prompt no longer fit the
    16k window (ERROR). The ToolAgent's earlier answers are cut to a line per result, oldest first, the
    latest kept whole, until the prompt fits; only a prompt that cannot fit even so stops the run."""
    from autogen_core.models import AssistantMessage, SystemMessage, UserMessage

    from pse.models._context import ContextWindowClient
    from pse.protocol import ResultItem, parse_tool_results, render_tool_results

    def read(name: str) -> UserMessage:
        item = ResultItem(1, "read_file", "ok", f"{name}: " + "row,1,2,3\n" * 100)
        return UserMessage(content=render_tool_results("Specialist", [item]), source="ToolAgent")

    asked = AssistantMessage(content="<tool_calls>…</tool_calls>", source="Specialist")
    messages = [SystemMessage(content="the prompt"), UserMessage(content="the task", source="user")]
    messages += [asked, read("a.csv"), asked, read("b.csv"), asked, read("c.csv")]
    inner = _Capture()
    client = ContextWindowClient(inner, role="Specialist", model="m", window=2000, completion=500)  # type: ignore[arg-type]
    await client.create(messages)
    shown = [
        parse_tool_results(str(m.content))[1][0]
        for m in inner.sent
        if getattr(m, "source", "") == "ToolAgent"
    ]
    assert [r.name for r in shown] == ["read_file"] * 3 and [r.status for r in shown] == ["ok"] * 3
    assert "left out to fit the context window" in shown[0].output  # the oldest went first
    assert shown[-1].output.startswith("c.csv: row,1,2,3")  # the latest stays whole
    tight = ContextWindowClient(inner, role="Specialist", model="m", window=900, completion=500)  # type: ignore[arg-type]
    with pytest.raises(ContextWindowError, match="the window is 900"):
        await tight.create(messages)


async def test_every_answer_a_slow_server_finished_before_the_run_ended_is_in_the_trace_probes_included(
    tmp_path: Path,
) -> None:
    """Issue 47, item 6: against a server that answers every call after 4 s, a run with a 6 s budget spent
    its first 4 s on a grammar-support probe that no trace held. The probe is now a call of the run: its
    tokens counted (the Planner's, whose call needed it), its reply kept in `trace.probes`; the Planner's
    own call, cut at 6 s before the server finished it, is the run's one estimate; the run ends within 2 s
    of its budget."""
    with ChatStandIn("openai", probe_delay_s=4) as stand_in:
        stand_in.script(*(Reply(content=t["content"], usage=(500, 50), delay_s=4) for t in _TURNS))
        started = time.monotonic()
        summary = await run_to_end(prepare_run("code-delivery", _openai(stand_in, tmp_path, run_timeout_s=6)))
        elapsed = time.monotonic() - started
        time.sleep(4 + 6 - elapsed + 0.5)  # past when the cut call would have been answered: it never is
        served = list(stand_in.probes_delivered) + list(stand_in.delivered)
    assert (summary.outcome, summary.outcome_reason) == (
        "TIMEOUT",
        "run wall-clock limit reached (PSE_RUN_TIMEOUT_S)",
    )
    assert elapsed < 6 + 2, f"a 6 s run took {elapsed:.1f} s"
    trace = load_trace(Path(summary.trace))
    assert served == [(3, 1)]  # the probe, answered at 4 s; the Planner's call was cut at 6 s
    assert [
        (p.role, p.server, p.prompt_tokens, p.completion_tokens, p.estimated, p.reply) for p in trace.probes
    ] == [("Planner", stand_in.url, 3, 1, False, "OK")]
    assert trace.probes[0].learned == "it applied none of the probe's grammar fields (replied 'OK')"
    assert trace.probes[0].ms is not None and trace.probes[0].ms >= 4000
    planner = trace.tokens.by_role["Planner"]
    assert planner.calls == 2 and planner.completion == 1  # the probe, and the cut call (no completion)
    reported = sum(t.prompt + t.completion - t.estimated for t in trace.tokens.by_role.values())
    assert reported == sum(p + c for p, c in served)  # every served token, and nothing else, as reported
    assert planner.estimated == planner.prompt - 3 > 0  # the cut call's prompt, by PSE's counter


async def test_a_probe_the_deadline_cuts_is_recorded_as_an_estimate(tmp_path: Path) -> None:
    with ChatStandIn("openai", probe_delay_s=8) as stand_in:
        started = time.monotonic()
        summary = await run_to_end(prepare_run("code-delivery", _openai(stand_in, tmp_path, run_timeout_s=2)))
        elapsed = time.monotonic() - started
    assert summary.outcome == "TIMEOUT" and elapsed < 2 + 2
    trace = load_trace(Path(summary.trace))
    assert [(p.role, p.completion_tokens, p.estimated, p.reply) for p in trace.probes] == [
        ("Planner", 0, True, None)
    ]
    assert trace.probes[0].learned == "cut: the run stopped before the server answered"
    assert trace.tokens.by_role["Planner"].calls == 1 and stand_in.requests == []


async def test_a_server_is_probed_once_then_known_to_later_runs_and_processes(tmp_path: Path) -> None:
    """What the probe learned is kept across runs: in the process, and in the cache file for the next one
    (`SERVER_PROBES.clear()` forgets what the process knows, as a new process would)."""
    from pse.models import SERVER_PROBES

    with ChatStandIn("openai", applies="grammar") as stand_in:
        first = await run_to_end(prepare_run("code-delivery", _openai(stand_in, tmp_path, token_budget=3000)))
        asked_first = len(stand_in.requests)
        SERVER_PROBES.clear()
        second = await run_to_end(
            prepare_run("code-delivery", _openai(stand_in, tmp_path, token_budget=3000))
        )
        probes = len(stand_in.probes)
    assert probes == 1
    assert len(load_trace(Path(first.trace)).probes) == 1 and load_trace(Path(second.trace)).probes == []
    sent = [r.body.get("grammar") for r in stand_in.requests]
    assert 0 < asked_first < len(sent)
    assert all(isinstance(g, str) and g.startswith("root ::= ") for g in sent)  # both runs sent the grammar
    cache = SERVER_PROBES.cache() if SERVER_PROBES.cache is not None else None
    assert cache is not None and json.loads(cache.read_text())[stand_in.url]["dialect"] == "llama.cpp"
