"""Protocol scanners under hostile input: seconds for a 1 MiB attack message, and normal throughput.

Every scan of a model message runs on the event loop, so a scan that is quadratic in the message length
stalls the whole run (see `pse/protocol/_scan.py`). For each message shape that once made a scan
quadratic (the attacks of tests/test_protocol_hostile.py), `hostile_1mib_<shape>_s` is the wall-clock
seconds the slowest public scanner takes on 1 MiB of it (best of three; `hostile_slowest_scan` names
that scanner). `normal_mb_per_s` is each scanner's throughput on an ordinary ~100 kB message.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

from autogen_agentchat.messages import TextMessage

from pse.exceptions import ProtocolError
from pse.protocol import (
    ParamSpec,
    ResultItem,
    ToolSignature,
    find_blocked,
    has_tool_calls,
    parse_plan,
    parse_tool_calls,
    parse_tool_results,
    parse_verdict,
    render_tool_calls,
    render_tool_results,
    strip_tool_traffic,
)
from pse.team import RoleFinished

_MIB = 1024 * 1024
_ROUNDS = 3
_NORMAL_ROUNDS = 20
_TOOLS = {
    "read_file": ToolSignature("read_file", (ParamSpec("path"),)),
    "write_file": ToolSignature("write_file", (ParamSpec("path"), ParamSpec("content"))),
}
_READ_A = '<tool_calls><invoke name="read_file"><parameter name="path">a</parameter></invoke></tool_calls>'
_CODE_LINE = 'if a < b and c & d: print("<parameter name=x>", a[i] >= 0)  # &lt; stays literal\n'

Scan = Callable[[str], object]


def _fill(unit: str, size: int, prefix: str = "", suffix: str = "") -> str:
    return prefix + unit * ((size - len(prefix) - len(suffix)) // len(unit)) + suffix


def _attribute_words(size: int) -> str:
    word = "1a" * (size // 12)
    return (
        f"<plan {word}></plan><verdict {word}></verdict><blocked {word}></blocked>"
        f'<tool_results {word}></tool_results><tool_calls><invoke {word}><parameter name="p">v'
        "</parameter></invoke></tool_calls>"
    )


def _many_criteria(size: int) -> str:
    count = size // 90
    plan = "".join(f'<criterion id="C{i}">c</criterion>' for i in range(count))
    verdict = "".join(f'<criterion id="C{i}" met="true">ok</criterion>' for i in range(count))
    return (
        f"<plan><goal>g</goal>{plan}</plan>\n"
        f'<verdict status="PASS"><reason_code>OK</reason_code>{verdict}</verdict>'
    )


_MIXTURE = (
    '<![CDATA[ Write `<tool_calls>` blocks. <plan <verdict status="PASS <criterion id="AC1 '
    '<tool_results for="Planner"></tool_results><tool_results for="Planner"><tool_calls> '
    '<tool_calls><invoke name="x"><parameter name="p">'
)
_RESULT_HEAD = '<tool_results for="Planner">\n<result index="1" name="read_file" status="ok">'

SHAPES: dict[str, Callable[[int], str]] = {
    "unclosed_cdata": lambda size: _fill("<![CDATA[", size),
    "backticked_mentions": lambda size: _fill("Write `<tool_calls>` blocks to ask for a tool. ", size),
    "nested_unclosed_calls": lambda size: _fill('<tool_calls><invoke name="x"><parameter name="p">', size),
    "unclosed_tool_results": lambda size: _fill('<tool_results for="Planner"><tool_calls>', size),
    "openers_without_bracket": lambda size: _fill(
        '<plan <verdict status="PASS <criterion id="AC1 <blocked reason_code="X <tool_calls <invoke name="x ',
        size,
    ),
    "results_full_of_cdata": lambda size: _fill(
        "<![CDATA[x]]>", size, _RESULT_HEAD, f"</result>\n</tool_results>\n{_READ_A}"
    ),
    "many_results_then_unclosed_cdata": lambda size: _fill(
        '<tool_results for="Planner"></tool_results>', size, suffix=f"<![CDATA[ {_READ_A}"
    ),
    "attribute_words": _attribute_words,
    "many_criteria": _many_criteria,
    "mixture": lambda size: _fill(_MIXTURE, size),
}


def _finishing(runner: asyncio.Runner) -> Scan:
    """Whether a phase's termination condition sees the Planner's final message (no tool request)."""

    def finished(text: str) -> bool:
        condition = RoleFinished("Planner")
        runner.run(condition([TextMessage(content=text, source="Planner")]))
        return condition.fired

    return finished


def _scans(runner: asyncio.Runner) -> dict[str, Scan]:
    return {
        "strip_tool_traffic": strip_tool_traffic,
        "parse_plan": parse_plan,
        "parse_verdict": parse_verdict,
        "find_blocked": lambda text: find_blocked(text, "Specialist"),
        "has_tool_calls": has_tool_calls,
        "parse_tool_calls": lambda text: parse_tool_calls(text, _TOOLS),
        "parse_tool_results": parse_tool_results,
        "role_finished": _finishing(runner),
    }


def _best_seconds(scan: Scan, text: str, rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        with contextlib.suppress(ProtocolError, ValueError):  # refusing is fine: its cost is the figure
            scan(text)
        best = min(best, time.perf_counter() - started)
    return best


def _normal_message() -> str:
    """~100 kB a Specialist might write: results read back, a plan and verdict quoted, a write request."""
    code = _CODE_LINE * (50_000 // len(_CODE_LINE))
    results = render_tool_results("Specialist", [ResultItem(1, "read_file", "ok", code, 3)])
    request = render_tool_calls([("write_file", {"path": "big.py", "content": code})])
    plan = '<plan><goal>g</goal><criterion id="AC1">works</criterion></plan>'
    verdict = '<verdict status="PASS"><reason_code>OK</reason_code></verdict>'
    return f"{results}\nI read it. The plan was:\n{plan}\n{verdict}\nNow I write:\n```xml\n{request}\n```\n"


def run() -> dict[str, object]:
    """Figures for `python -m bench protocol` (see bench/__main__.py)."""
    figures: dict[str, object] = {}
    slowest: dict[str, str] = {}
    with asyncio.Runner() as runner:
        scans = _scans(runner)
        for shape, build in SHAPES.items():
            text = build(_MIB)
            seconds = {name: _best_seconds(scan, text, _ROUNDS) for name, scan in scans.items()}
            name = max(seconds, key=lambda n: seconds[n])
            figures[f"hostile_1mib_{shape}_s"] = round(seconds[name], 4)
            slowest[shape] = name
        figures["hostile_slowest_scan"] = slowest
        normal = _normal_message()
        size = len(normal.encode())
        figures["normal_message_bytes"] = size
        figures["normal_mb_per_s"] = {
            name: round(size / _best_seconds(scan, normal, _NORMAL_ROUNDS) / 1e6, 1)
            for name, scan in scans.items()
        }
    return figures
