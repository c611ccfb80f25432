"""Engine benchmarks: retry token cost (step_buffer vs history), orchestration overhead, concurrency.

1. Total prompt tokens for 0–5 PARTIAL retries of the code-delivery task, in `step_buffer` mode and in
   the `history` baseline (one team, whole history: what plain AutoGen does), on the same cassette.
2. Orchestration overhead per agent turn: a full PSE cycle (engine, scoped contexts, ToolAgent with a
   real read_file, gates, trace) vs a bare AutoGen RoundRobinGroupChat of three AssistantAgents with
   the same scripted client and the same number of model turns; and vs bare AutoGen in PSE's shape
   (a group chat per phase, a tool stand-in), which splits the ratio into AutoGen's share and PSE's.
3. 50 concurrent runs in one process with a simulated model latency: wall time vs one run, peak memory.
5. Step mode: the package-steps demo (S2 and S3 independent) with a simulated model latency, its steps
   at once (PSE_MAX_PARALLEL_STEPS=3) against one at a time (1): wall time and ratio.
6. A cProfile breakdown of a light run: the share of own time by area (store, engine, AutoGen, …).
4. The reusable-prefix share of the reference tasks in both context modes: of each role's prompt tokens,
   the ones that repeat a prefix already sent to the same model (what a provider's prefix cache can hit).
"""

from __future__ import annotations

import asyncio
import json
import statistics
import tempfile
import time
import tracemalloc
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from autogen_agentchat.agents import AssistantAgent, BaseChatAgent
from autogen_agentchat.base import Response
from autogen_agentchat.conditions import MaxMessageTermination
from autogen_agentchat.messages import TextMessage
from autogen_agentchat.teams import RoundRobinGroupChat

from pse.config import load_settings
from pse.engine import load_trace
from pse.models import (
    Cassette,
    CassettePlayer,
    PrefixMeter,
    ScriptedChatCompletionClient,
    common_prefix_tokens,
    normalize,
)
from pse.runner import prepare_run, run_to_end
from pse.tasks import TaskRegistry
from pse.tokens import count_tokens

_TASK = TaskRegistry.discover(None).get("code-delivery")
_TURNS = [(t["role"], t["content"]) for t in json.loads(_TASK.cassette_path.read_text())["turns"]]  # type: ignore[union-attr]
PLAN, S_BAD, S_REPORT, E_CHECKS, E_PARTIAL, S_FIX, S_REPORT2, E_CHECKS2, E_PASS = _TURNS


def _write(path: Path, turns: list[tuple[str, str]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"version": 1, "turns": [{"role": r, "content": c} for r, c in turns]}))
    return path


def _retry_turns(retries: int) -> list[tuple[str, str]]:
    turns = [PLAN]
    for _ in range(retries):
        turns += [S_BAD, S_REPORT, E_CHECKS, E_PARTIAL]
    if retries == 0:
        return [PLAN, S_BAD, S_FIX, S_REPORT2, E_CHECKS2, E_PASS]
    return [*turns, S_FIX, S_REPORT2, E_CHECKS2, E_PASS]


async def _run(cassette: Path, runs: Path, task: str = "code-delivery", **options: Any) -> Any:
    settings = load_settings(cassette=cassette, runs_dir=runs, **options)
    summary = await run_to_end(prepare_run(task, settings))
    return load_trace(Path(summary.trace))


def retry_tokens(tmp: Path) -> dict[str, Any]:
    rows = []
    for retries in range(6):
        cassette = _write(tmp / f"retry{retries}.json", _retry_turns(retries))
        row: dict[str, Any] = {"partial_retries": retries}
        for mode in ("step_buffer", "history"):
            trace = asyncio.run(
                _run(
                    cassette, tmp / "runs", max_partial_retries=5, max_criterion_failures=9, context_mode=mode
                )
            )
            assert trace.outcome == "PASSED", (mode, retries, trace.outcome_reason)
            row[f"{mode}_prompt_tokens"] = trace.tokens.prompt
            row[f"{mode}_last_cycle_prompt_tokens"] = sum(t.prompt for t in trace.cycles[-1].tokens.values())
            roles = trace.tokens.by_role.values()
            row[f"{mode}_reusable_prefix"] = round(
                sum(t.prefix_reusable for t in roles) / sum(t.prefix_counted for t in roles), 3
            )
        row["history_over_step_buffer"] = round(
            row["history_prompt_tokens"] / row["step_buffer_prompt_tokens"], 3
        )
        rows.append(row)
    return {"rows": rows, "headline_ratio_at_5_retries": rows[-1]["history_over_step_buffer"]}


_LIGHT_TASK = """description = "bench: write a note, the Evaluator reads it"
goal = "Write note.md saying hello."
expected_outputs = ["note.md"]
"""
_LIGHT_PLAN = (
    "Planner",
    '<plan><goal>note</goal><criterion id="AC1">note.md says hello</criterion>'
    '<output path="note.md"/></plan>',
)
_LIGHT_WRITE = (
    "Specialist",
    '<tool_calls><invoke name="write_file"><parameter name="path">note.md</parameter>'
    '<parameter name="content">hello</parameter></invoke></tool_calls>',
)
_LIGHT_REPORT = ("Specialist", "Wrote note.md.")
_LIGHT_READ = (
    "Evaluator",
    '<tool_calls><invoke name="read_file"><parameter name="path">note.md</parameter></invoke></tool_calls>',
)
_LIGHT_PASS = (
    "Evaluator",
    '<verdict status="PASS"><reason_code>ALL_MET</reason_code>'
    '<criterion id="AC1" met="true">says hello</criterion></verdict>',
)
_LIGHT = [_LIGHT_PLAN, _LIGHT_WRITE, _LIGHT_REPORT, _LIGHT_READ, _LIGHT_PASS]


def _light_tasks_dir(tmp: Path) -> Path:
    root = tmp / "tasks"
    folder = root / "bench-light"
    folder.mkdir(parents=True, exist_ok=True)
    (root / "registry.toml").write_text('[tasks.bench-light]\npath = "bench-light"\n')
    (folder / "task.toml").write_text(_LIGHT_TASK)
    for role in ("planner", "specialist", "evaluator"):
        (folder / f"{role}.md").write_text(f"Bench {role}.\n")
    return root


# Round robin P→S→E→P→S: five model turns, the same replies PSE's roles give.
_BARE_TURNS = [_LIGHT_PLAN, _LIGHT_WRITE, _LIGHT_READ, _LIGHT_PLAN, _LIGHT_REPORT]


async def _bare_run(latency_s: float = 0.0) -> None:
    """A bare AutoGen RoundRobinGroupChat of three AssistantAgents on the scripted client, built and run."""
    cassette = Cassette.model_validate(
        {"version": 1, "turns": [{"role": r, "content": c} for r, c in _BARE_TURNS]}
    )
    player = CassettePlayer(cassette, strict=False)
    player.latency_s = latency_s
    agents = [
        AssistantAgent(name, ScriptedChatCompletionClient(player, name), system_message="bench")
        for name in ("Planner", "Specialist", "Evaluator")
    ]
    team = RoundRobinGroupChat(agents, termination_condition=MaxMessageTermination(len(_BARE_TURNS) + 1))
    await team.run(task="bench")


class _ToolStandIn(BaseChatAgent):
    """Answers every request with one fixed tool result: the ToolAgent's seat, with no tool behind it."""

    def __init__(self) -> None:
        super().__init__("ToolAgent", "answers tool requests")

    @property
    def produced_message_types(self) -> tuple[type[TextMessage]]:
        return (TextMessage,)

    async def on_messages(self, messages: Any, cancellation_token: Any) -> Response:
        return Response(chat_message=TextMessage(source=self.name, content="<tool_results>ok</tool_results>"))

    async def on_reset(self, cancellation_token: Any) -> None:
        return None


# PSE's light run, phase by phase: (role, its turns in the phase); the ToolAgent answers between them.
_PHASES = [
    ("Planner", [_LIGHT_PLAN]),
    ("Specialist", [_LIGHT_WRITE, _LIGHT_REPORT]),
    ("Evaluator", [_LIGHT_READ, _LIGHT_PASS]),
]
_PHASE_TURNS = sum(2 * len(turns) - 1 for _, turns in _PHASES)


async def _bare_phases_run() -> None:
    """Bare AutoGen in PSE's shape: one RoundRobinGroupChat per phase, of the role's AssistantAgent and a
    tool stand-in, as many turns as PSE's light run (7) and nothing else: no trace, store, gates or tools."""
    cassette = Cassette.model_validate(
        {"version": 1, "turns": [{"role": r, "content": c} for _, turns in _PHASES for r, c in turns]}
    )
    player = CassettePlayer(cassette, strict=False)
    tool = _ToolStandIn()
    for name, turns in _PHASES:
        agent = AssistantAgent(name, ScriptedChatCompletionClient(player, name), system_message="bench")
        team = RoundRobinGroupChat([agent, tool], termination_condition=MaxMessageTermination(2 * len(turns)))
        await team.run(task="bench")


def orchestration_overhead(tmp: Path) -> dict[str, Any]:
    """Framework time per agent turn: the engine's run (every turn of the cycle, ToolAgent turns with real
    file tools, gates, trace and store writes) against a bare AutoGen round robin's run, both timed
    from a built team to its end; PSE's run setup (folder, workspace seed, team wiring) is reported
    apart, per run. Settings are loaded once, as `pse batch` and the Python API do."""
    tasks_dir = _light_tasks_dir(tmp)
    cassette = _write(tmp / "light.json", _LIGHT)
    settings = load_settings(
        cassette=cassette, runs_dir=tmp / "runs-o", tasks_dir=tasks_dir, sandbox="fallback"
    )
    pse_times, setup_times = [], []

    def pse() -> None:
        started = time.perf_counter()
        prepared = prepare_run("bench-light", settings)
        ready = time.perf_counter()
        asyncio.run(run_to_end(prepared))
        trace = prepared.engine.trace
        pse_times.append((time.perf_counter() - ready) / trace.cycles[0].turns)
        setup_times.append(ready - started)

    async def bare() -> float:
        started = time.perf_counter()
        await _bare_run()
        return (time.perf_counter() - started) / len(_BARE_TURNS)

    async def bare_phases() -> float:
        started = time.perf_counter()
        await _bare_phases_run()
        return (time.perf_counter() - started) / _PHASE_TURNS

    # Interleaved, 60 of each: a shared machine's drift then weighs on all sides alike.
    bare_times, phases_times = [], []
    for _ in range(60):
        pse()
        bare_times.append(asyncio.run(bare()))
        phases_times.append(asyncio.run(bare_phases()))
    pse_ms, bare_ms = statistics.median(pse_times) * 1000, statistics.median(bare_times) * 1000
    phases_ms = statistics.median(phases_times) * 1000
    return {
        "pse_ms_per_turn_p50": round(pse_ms, 2),
        "bare_autogen_ms_per_turn_p50": round(bare_ms, 2),
        "pse_over_bare": round(pse_ms / bare_ms, 2),
        "bare_autogen_phases_ms_per_turn_p50": round(phases_ms, 2),
        "bare_phases_over_bare": round(phases_ms / bare_ms, 2),
        "pse_over_bare_phases": round(pse_ms / phases_ms, 2),
        "pse_setup_ms_per_run_p50": round(statistics.median(setup_times) * 1000, 2),
        "note": "PSE turns include ToolAgent turns (real file tools), gates, trace and run-store writes; "
        "bare_phases is AutoGen alone in PSE's shape (a group chat per phase, a tool stand-in)",
    }


_AREAS = [
    ("pse store (run index)", ("/pse/store/", "/sqlalchemy/", "sqlite3")),
    ("pse engine", ("/pse/engine/",)),
    ("pse team and contexts", ("/pse/team/",)),
    ("pse ToolAgent and tools", ("/pse/toolagent/", "/pse/tools/", "/pse/sandbox/")),
    ("pse models (clients, meters)", ("/pse/models/", "/pse/tokens.py")),
    ("pse trace and events", ("/pse/trace.py", "/pse/events.py", "/pse/_run_entry.py")),
    ("pse other", ("/pse/",)),
    ("AutoGen runtime and agents", ("/autogen_core/", "/autogen_agentchat/")),
    ("OpenTelemetry (AutoGen's spans)", ("/opentelemetry/",)),
    ("pydantic", ("/pydantic", "pydantic_core")),
    ("asyncio", ("/asyncio/", "select.epoll")),
]


def profile_breakdown(tmp: Path, runs: int = 20) -> dict[str, Any]:
    """Where a light run's time goes (cProfile, engine run only): share of own time by area, and the
    functions that cost the most. The profiler slows everything; compare shares, not milliseconds."""
    import cProfile
    import pstats

    tasks_dir = _light_tasks_dir(tmp)
    cassette = _write(tmp / "light.json", _LIGHT)
    settings = load_settings(
        cassette=cassette, runs_dir=tmp / "runs-p", tasks_dir=tasks_dir, sandbox="fallback"
    )
    prepared = [prepare_run("bench-light", settings) for _ in range(runs + 1)]
    asyncio.run(run_to_end(prepared[0]))  # warm: imports, caches
    profiler = cProfile.Profile()
    for one in prepared[1:]:
        profiler.enable()
        asyncio.run(run_to_end(one))
        profiler.disable()
    stats = pstats.Stats(profiler)
    by_area: dict[str, float] = {}
    costly: list[tuple[float, str]] = []
    total = 0.0
    for (path, line, name), (_, _, own, _, _) in stats.stats.items():  # type: ignore[attr-defined]
        total += own
        where = f"{path}:{line}({name})"
        area = next((a for a, marks in _AREAS if any(m in where for m in marks)), "other")
        by_area[area] = by_area.get(area, 0.0) + own
        costly.append((own, where.split("site-packages/")[-1].split("/src/")[-1]))
    costly.sort(reverse=True)
    return {
        "runs_profiled": runs,
        "own_time_share_by_area": {
            a: round(t / total, 3) for a, t in sorted(by_area.items(), key=lambda x: -x[1])
        },
        "top_functions_own_ms_per_run": {w: round(t / runs * 1000, 2) for t, w in costly[:12]},
    }


def concurrency(tmp: Path, runs: int = 50, latency_s: float = 0.2) -> dict[str, Any]:
    """50 runs at once in one process against one alone, each with a simulated model latency; timed
    without tracemalloc (it slows Python several-fold), memory measured in a second, separate pass.
    The same for a bare AutoGen round robin of as many model turns, and the CPU time a concurrent PSE
    run costs: one process runs one turn at a time, so 50 runs take at least 50 runs' CPU time."""
    tasks_dir = _light_tasks_dir(tmp)
    cassette = _write(tmp / "light.json", _LIGHT)
    settings = load_settings(
        cassette=cassette, runs_dir=tmp / "runs-c", tasks_dir=tasks_dir, sandbox="fallback",
        scripted_latency_s=latency_s,
    )  # fmt: skip

    traces: list[str] = []

    async def one() -> str:
        summary = await run_to_end(prepare_run("bench-light", settings))
        traces.append(summary.trace)
        return summary.outcome or "NONE"

    async def many() -> list[str]:
        return await asyncio.gather(*(one() for _ in range(runs)))

    def last_first_call(started: datetime) -> float:
        """Seconds from the batch's start to the first model call of the run that made it last: each
        trace's first message arrived `model_ms` after its call began."""
        firsts = []
        for path in traces[-runs:]:
            first = load_trace(Path(path)).cycles[0].messages[0]
            began = datetime.fromisoformat(first.at) - timedelta(milliseconds=first.model_ms or 0)
            firsts.append((began - started).total_seconds())
        return max(firsts)

    async def prepared_many() -> float:
        """The engine's share: the runs prepared first (folders, workspaces, wiring), then timed."""
        prepared = [prepare_run("bench-light", settings) for _ in range(runs)]
        started = time.perf_counter()
        await asyncio.gather(*(run_to_end(p) for p in prepared))
        return time.perf_counter() - started

    async def bare_many() -> None:
        await asyncio.gather(*(_bare_run(latency_s) for _ in range(runs)))

    singles, walls, cpus, bare_singles, bare_walls, engine_walls, lasts = [], [], [], [], [], [], []
    for _ in range(3):
        engine_walls.append(asyncio.run(prepared_many()))
        started = time.perf_counter()
        asyncio.run(one())
        singles.append(time.perf_counter() - started)
        started, cpu, clock = time.perf_counter(), time.process_time(), datetime.now(UTC)
        outcomes = asyncio.run(many())
        walls.append(time.perf_counter() - started)
        cpus.append(time.process_time() - cpu)
        lasts.append(last_first_call(clock))
        started = time.perf_counter()
        asyncio.run(_bare_run(latency_s))
        bare_singles.append(time.perf_counter() - started)
        started = time.perf_counter()
        asyncio.run(bare_many())
        bare_walls.append(time.perf_counter() - started)
    single, wall = statistics.median(singles), statistics.median(walls)
    bare_single, bare_wall = statistics.median(bare_singles), statistics.median(bare_walls)
    tracemalloc.start()
    asyncio.run(many())
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {
        "runs": runs,
        "simulated_model_latency_s": latency_s,
        "one_run_wall_s": round(single, 2),
        "concurrent_wall_s": round(wall, 2),
        "concurrent_over_one": round(wall / single, 2),
        "cpu_ms_per_concurrent_run": round(statistics.median(cpus) / runs * 1000, 1),
        "prepared_first_concurrent_over_one": round(statistics.median(engine_walls) / single, 2),
        "last_run_first_model_call_s": round(statistics.median(lasts), 3),
        "bare_autogen_concurrent_over_one": round(bare_wall / bare_single, 2),
        "passed": outcomes.count("PASSED"),
        "peak_python_memory_mb": round(peak / 2**20, 1),
        "peak_python_memory_per_run_mb": round(peak / 2**20 / runs, 2),
    }


class _NovelContent:
    """While active, counts every prompt's tokens that no earlier prompt of the run held: the tokens of
    each message new to the run, less its longest common start with an earlier message of the same
    speaker. A prefix cache serves only what was sent before, so however PSE ordered the same messages,
    at least this many prompt tokens are fresh: 1 - novel / counted bounds the reusable-prefix share."""

    def __init__(self) -> None:
        self.novel = 0
        self._seen: set[tuple[str, str]] = set()
        self._observe = PrefixMeter.observe

    def __enter__(self) -> _NovelContent:
        counter, observe = self, self._observe

        def observing(meter: PrefixMeter, model: str, role: str, messages: Any) -> tuple[int, int]:
            for speaker, text in normalize(messages):
                if (speaker, text) in counter._seen:
                    continue
                shared = max(
                    (
                        common_prefix_tokens([(speaker, text)], [was])
                        for was in counter._seen
                        if was[0] == speaker
                    ),
                    default=0,
                )
                counter._seen.add((speaker, text))
                counter.novel += max(0, count_tokens(text) - shared)
            return observe(meter, model, role, messages)

        PrefixMeter.observe = observing  # type: ignore[method-assign]
        return self

    def __exit__(self, *_: object) -> None:
        PrefixMeter.observe = self._observe  # type: ignore[method-assign]


def reusable_prefix(tmp: Path) -> dict[str, Any]:
    """Per reference task and context mode: each role's reusable-prefix share and the run's, and the
    most any ordering of the same messages could reach (`_NovelContent`)."""
    rows: dict[str, Any] = {}
    for task in ("code-delivery", "incident-review"):
        for mode in ("step_buffer", "history"):
            cassette = TaskRegistry.discover(None).get(task).cassette_path
            assert cassette is not None
            with _NovelContent() as novel:
                trace = asyncio.run(_run(cassette, tmp / f"prefix-{task}-{mode}", task, context_mode=mode))
            roles = trace.tokens.by_role
            counted = sum(t.prefix_counted for t in roles.values())
            rows[f"{task}/{mode}"] = {
                "by_role": {r: round(t.prefix_reusable / t.prefix_counted, 3) for r, t in roles.items()},
                "run": round(sum(t.prefix_reusable for t in roles.values()) / counted, 3),
                "bound_from_novel_content": round(1 - novel.novel / counted, 3),
                "prompt_tokens": counted,
                "novel_prompt_tokens": novel.novel,
            }
    return rows


_S2_PARTIAL = {
    "role": "Evaluator",
    "step": "S2",
    "content": '<verdict status="PARTIAL">\n  <reason_code>MISSING_CASE</reason_code>\n'
    '  <criterion id="AC2" met="false">no test checks that ties come out in alphabetical order</criterion>\n'
    "  <summary>the ties case is not tested</summary>\n</verdict>",
}


def _critical_share(turns: list[dict[str, Any]]) -> float:
    """The best `steps at once / one at a time` ratio the plan's shape allows, counting model turns:
    the Planner, S1 and the final review are serial, S2 and S3 overlap (Amdahl's bound)."""
    per_step = {s: sum(1 for t in turns if t.get("step") == s) for s in ("S1", "S2", "S3")}
    serial = len(turns) - per_step["S2"] - per_step["S3"]
    return round((serial + max(per_step["S2"], per_step["S3"])) / len(turns), 3)


def steps_parallel(tmp: Path, latency_s: float = 0.2) -> dict[str, Any]:
    """The steps demo's wall time with independent steps at once vs one at a time, at a model latency,
    for three shapes of the same plan (S2 and S3 depend on S1): as shipped (S3 needs a second attempt),
    balanced (both pass at once) and both revised (each needs a second attempt). Each row gives the
    bound its shape allows (model turns on the critical path over all), so the overlap PSE achieves is
    read against what the plan permits."""
    demo = json.loads(TaskRegistry.discover(None).get("package-steps").cassette_path.read_text())["turns"]  # type: ignore[union-attr]
    s3 = [i for i, t in enumerate(demo) if t.get("step") == "S3"]
    s2 = [t for t in demo if t.get("step") == "S2"]  # write, report, run the tests, PASS
    # S3 passing at once: its first write (cli.py and its test), the revision's cli.py written next in
    # the same attempt, then the report and the review that passed (no first report, no PARTIAL).
    balanced = [t for i, t in enumerate(demo) if i not in s3[1:4]]
    retry = {**s2[0], "content": "The review asks for a ties test; it is there now.\n" + s2[0]["content"]}
    first_s2 = demo.index(s2[0])
    both = [*demo[:first_s2], *s2[:3], _S2_PARTIAL, retry, *s2[1:], *demo[first_s2 + len(s2) :]]
    shapes: dict[str, list[dict[str, Any]]] = {"demo": demo, "balanced": balanced, "both_revised": both}

    async def one(parallel: int, name: str) -> tuple[float, str]:
        cassette = tmp / f"steps-{name}.json"
        cassette.write_text(json.dumps({"version": 1, "turns": shapes[name]}))
        settings = load_settings(
            runs_dir=tmp / f"steps-{parallel}-{name}", sandbox="fallback", max_parallel_steps=parallel,
            cassette=cassette, scripted_latency_s=latency_s,
        )  # fmt: skip
        started = time.perf_counter()
        summary = await run_to_end(prepare_run("package-steps", settings))
        return time.perf_counter() - started, summary.outcome or "NONE"

    rows: dict[str, Any] = {"simulated_model_latency_s": latency_s}
    for name, turns in shapes.items():
        at_once, sequential, outcomes = [], [], []
        for _ in range(3):
            wall, outcome = asyncio.run(one(3, name))
            at_once.append(wall)
            outcomes.append(outcome)
            wall, outcome = asyncio.run(one(1, name))
            sequential.append(wall)
            outcomes.append(outcome)
        if set(outcomes) != {"PASSED"}:  # the wall time of a run that broke off measures nothing
            raise RuntimeError(f"the steps bench's {name!r} shape ended {sorted(set(outcomes))}, not PASSED")
        a, b = statistics.median(at_once), statistics.median(sequential)
        rows[name] = {
            "model_turns": len(turns),
            "parallel_3_wall_s": round(a, 2),
            "one_at_a_time_wall_s": round(b, 2),
            "parallel_over_sequential": round(a / b, 3),
            "bound_from_the_plan_shape": _critical_share(turns),
            "outcomes": sorted(set(outcomes)),
        }
    return rows


def run() -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        return {
            "reusable_prefix": reusable_prefix(tmp),
            "steps_parallel": steps_parallel(tmp),
            "retry_tokens": retry_tokens(tmp),
            "orchestration": orchestration_overhead(tmp),
            "profile": profile_breakdown(tmp),
            "concurrency": concurrency(tmp),
        }
