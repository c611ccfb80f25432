"""OpenTelemetry export (PSE_OTEL): a whole run against a loopback OpenAI stand-in, its spans sent over
OTLP/HTTP to a loopback receiver written here, which decodes them with opentelemetry-proto. Then the
same run's spans again, from its trace, through `pse trace export`."""

from __future__ import annotations

import gzip
import json
import logging
import os
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any

import pytest
import typer
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from typer.testing import CliRunner

import pse
from pse.cli._export import export_cmd
from pse.engine import Trace, load_trace
from pse.exceptions import ConfigError
from pse.roles import TOOL_AGENT, Role
from pse.tasks import TaskRegistry
from pse.telemetry import OTEL_EXTRA, trace_spans
from pse.tools import Tool
from standins import ChatStandIn, Reply

SECRET = "sk-live-secret-123456789"
_TURNS = json.loads(TaskRegistry.discover(None).get("code-delivery").cassette_path.read_text())["turns"]  # type: ignore[union-attr]


def _value(v: AnyValue) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    return getattr(v, kind) if kind else None


@dataclass
class Received:
    """One span as the receiver decoded it."""

    scope: str
    span: Span
    resource: dict[str, Any]

    @property
    def attributes(self) -> dict[str, Any]:
        return {a.key: _value(a.value) for a in self.span.attributes}

    def events(self, name: str) -> list[dict[str, Any]]:
        return [{a.key: _value(a.value) for a in e.attributes} for e in self.span.events if e.name == name]


@dataclass
class OtlpReceiver:
    """A loopback OTLP/HTTP receiver: accepts POST /v1/traces (protobuf), keeps the bodies and the spans."""

    bodies: list[bytes] = field(default_factory=list)
    spans: list[Received] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None

    @property
    def endpoint(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> OtlpReceiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                if self.path != "/v1/traces" or self.headers["Content-Type"] != "application/x-protobuf":
                    self.send_error(404)
                    return
                receiver.bodies.append(body)
                for rs in ExportTraceServiceRequest.FromString(body).resource_spans:
                    resource = {a.key: _value(a.value) for a in rs.resource.attributes}
                    for ss in rs.scope_spans:
                        receiver.spans += [Received(ss.scope.name, s, resource) for s in ss.spans]
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()

    def own(self) -> list[Received]:
        """PSE's own spans (not AutoGen's)."""
        return [r for r in self.spans if r.scope == "pse"]


def _no_otel_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith(("OTEL_", "AUTOGEN_")):
            monkeypatch.delenv(name)


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[OtlpReceiver]:
    """A receiver the standard OTEL_* variables point at (none of the developer's shell leaks in)."""
    _no_otel_variables(monkeypatch)
    with OtlpReceiver() as found:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", found.endpoint)
        monkeypatch.setenv("OTEL_SERVICE_NAME", "pse-under-test")
        yield found


def _tree(spans: list[Received]) -> dict[str, list[str]]:
    """Each span's name → its children's names, sorted ("": the roots)."""
    by_id = {r.span.span_id: r for r in spans}
    tree: dict[str, list[str]] = {}
    for r in spans:
        parent = by_id.get(r.span.parent_span_id)
        tree.setdefault(parent.span.name if parent else "", []).append(r.span.name)
    return {name: sorted(children) for name, children in tree.items()}


def _identity(spans: list[Received]) -> set[tuple[Any, ...]]:
    """What makes two exports the same spans: ids, parents, names, times, attributes and events."""
    return {
        (
            r.span.trace_id,
            r.span.span_id,
            r.span.parent_span_id,
            r.span.name,
            r.span.start_time_unix_nano,
            r.span.end_time_unix_nano,
            json.dumps(r.attributes, sort_keys=True),
            json.dumps([(e.name, e.time_unix_nano, len(e.attributes)) for e in r.span.events]),
        )
        for r in spans
    }


async def _stand_in_run(stand_in: ChatStandIn, runs_dir: Path, **settings: Any) -> pse.RunSummary:
    stand_in.script(*(Reply(content=t["content"], usage=(1000 + i, 100 + i)) for i, t in enumerate(_TURNS)))
    return await pse.arun(
        "code-delivery",
        provider="openai",
        model="m-test",
        base_url=stand_in.url,
        api_key=SECRET,
        runs_dir=runs_dir,
        **settings,
    )


async def test_a_run_exports_its_span_tree_with_genai_attributes_and_no_secret_or_content(
    receiver: OtlpReceiver, tmp_path: Path
) -> None:
    with ChatStandIn("openai") as stand_in:
        summary = await _stand_in_run(stand_in, tmp_path, otel="otlp")
        port = int(stand_in.url.split(":")[2].split("/")[0])
    assert summary.outcome == "PASSED"
    trace = load_trace(Path(summary.trace))
    own = receiver.own()
    chat = "chat m-test"
    write, read, tests, lint = (
        f"execute_tool {t}" for t in (Tool.WRITE_FILE, Tool.READ_FILE, Tool.RUN_PYTEST, Tool.RUN_RUFF)
    )
    assert _tree(own) == {
        "": ["invoke_workflow code-delivery"],
        "invoke_workflow code-delivery": [chat, "cycle 1", "cycle 2"],  # the server's probe (issue 47)
        "cycle 1": [chat] * 5 + [read, tests, lint, write, write],
        "cycle 2": [chat] * 4 + [tests, lint, write],
    }
    assert {r.resource.get("service.name") for r in receiver.spans} == {"pse-under-test"}
    assert len({r.span.trace_id for r in receiver.spans}) == 1

    # A chat span per role turn, with the GenAI attributes and the trace's exact tokens (the stand-in's).
    probes = [r for r in own if r.span.name == chat and r.attributes.get("pse.probe") is True]
    chats = sorted(
        (r for r in own if r.span.name == chat and r not in probes), key=lambda r: r.span.start_time_unix_nano
    )
    turns = [m for c in trace.cycles for m in c.messages if m.source != TOOL_AGENT]
    assert [(m.prompt_tokens, m.completion_tokens) for m in turns] == [(1000 + i, 100 + i) for i in range(9)]
    assert [r.attributes["gen_ai.agent.name"] for r in chats] == [m.source for m in turns]
    for r, m in zip(chats, turns, strict=True):
        a = r.attributes
        assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == (
            m.prompt_tokens,
            m.completion_tokens,
        )
        assert a["gen_ai.operation.name"] == "chat" and a["gen_ai.request.model"] == "m-test"
        assert list(a["gen_ai.response.finish_reasons"]) == [m.finish_reason] == ["stop"]
        assert m.model_ms is not None  # the span starts when the model's answering attempt did
        assert r.span.end_time_unix_nano - r.span.start_time_unix_nano <= (m.model_ms + 1) * 1_000_000
        assert a["gen_ai.provider.name"] == a["gen_ai.system"] == "openai"
        assert (a["server.address"], a["server.port"]) == ("127.0.0.1", port)
        assert (
            r.span.kind == Span.SPAN_KIND_CLIENT and r.span.end_time_unix_nano >= r.span.start_time_unix_nano
        )
    # The grammar-support probe is a chat span of the run: with it, every token of the trace is in a span.
    assert [
        (r.attributes["gen_ai.agent.name"], r.attributes["gen_ai.usage.input_tokens"]) for r in probes
    ] == [("Planner", 3)]
    assert sum(r.attributes["gen_ai.usage.input_tokens"] for r in chats + probes) == trace.tokens.prompt
    assert sum(r.attributes["gen_ai.usage.output_tokens"] for r in chats + probes) == trace.tokens.completion

    # A tool span per call: the ToolAgent's decision, rule and status.
    calls = [call for c in trace.cycles for call in c.tool_calls]
    spans_of_tools = {
        r.attributes["gen_ai.tool.call.id"]: r.attributes
        for r in own
        if r.span.name.startswith("execute_tool")
    }
    assert len(spans_of_tools) == len(calls) == 8
    pytest_call = spans_of_tools["1.4"]
    expected = {
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": Tool.RUN_PYTEST,
        "gen_ai.agent.name": Role.EVALUATOR, "pse.tool.requester": Role.EVALUATOR,
        "pse.tool.decision": "allowed", "pse.tool.status": "error",
        "pse.tool.rule": f"roles.{Role.EVALUATOR}.{Tool.RUN_PYTEST}", "pse.tool.facts.failed": 4,
        "error.type": "error",
    }  # fmt: skip
    assert expected.items() <= pytest_call.items() and pytest_call["pse.tool.ms"] > 0
    assert [spans_of_tools[f"1.{n}"]["pse.tool.requester"] for n in range(1, 6)] == [Role.SPECIALIST] * 2 + [
        Role.EVALUATOR
    ] * 3

    # Verdicts, gates and transitions are events of their cycle; the run says how it ended.
    cycles = {r.span.name: r for r in own if r.span.name.startswith("cycle")}
    assert [v["pse.verdict.status"] for v in cycles["cycle 1"].events("pse.verdict")] == ["PARTIAL"]
    assert cycles["cycle 1"].events("pse.verdict")[0]["pse.verdict.unmet"] == ["AC1", "AC3"]
    gates = {g["pse.gate.name"]: g["pse.gate.passed"] for g in cycles["cycle 1"].events("pse.gate")}
    assert gates["check:pytest"] is False and gates["outputs_exist"] is True
    moves = [
        (t["pse.transition.from"], t["pse.transition.to"])
        for n in ("cycle 1", "cycle 2")
        for t in cycles[n].events("pse.transition")
    ]
    assert moves == [(t.from_, t.to) for t in trace.transitions] and moves[-1] == ("REVIEWING", "PASSED")
    run = next(r for r in own if r.span.name == "invoke_workflow code-delivery").attributes
    assert (run["pse.outcome"], run["pse.cycles"], run["pse.tokens.prompt"]) == (
        "PASSED",
        2,
        trace.tokens.prompt,
    )

    # AutoGen's own spans of a cycle hang under that cycle's span.
    by_id = {r.span.span_id: r for r in receiver.spans}
    foreign = [r for r in receiver.spans if r.scope != "pse"]
    # One AutoGen `invoke_agent` span per turn of every agent (the ToolAgent's too), and one
    # `create_agent` per role phase: what AutoGen's own agents emit, whoever drives them.
    turns = Counter(f"invoke_agent {m.source}" for c in trace.cycles for m in c.messages)
    invoked = Counter(r.span.name for r in foreign if r.span.name.startswith("invoke_agent"))
    assert invoked == turns and turns[f"invoke_agent {Role.SPECIALIST}"] == 4
    assert {r.span.name.split()[0] for r in foreign} == {"invoke_agent", "create_agent"}

    def cycle_of(r: Received) -> str:
        while r.scope != "pse":
            r = by_id[r.span.parent_span_id]
        return r.span.name

    assert {cycle_of(r) for r in foreign} == {"cycle 1", "cycle 2"}

    # No secret, and (PSE_OTEL_CONTENT unset) no prompt, output or tool data in any byte exported.
    sent = b"".join(receiver.bodies)
    assert SECRET.encode() not in sent and b"sk-live" not in sent
    for text in (b"quicksort", b"pivot", b"<plan>", b"<verdict", b"Artifacts", b"def test_"):
        assert text not in sent, text
    keys = {k for r in receiver.spans for k in r.attributes}
    assert not keys & {
        "message",
        "gen_ai.output.messages",
        "gen_ai.input.messages",
        "gen_ai.tool.call.arguments",
    }

    # `pse trace export` of the same run: the same spans, ids and times included.
    live = _identity(own)
    receiver.bodies.clear()
    receiver.spans.clear()
    app = typer.Typer()
    trace_app = typer.Typer()
    trace_app.command("export")(export_cmd)
    app.add_typer(trace_app, name="trace")
    result = CliRunner().invoke(
        app, ["trace", "export", summary.run_id, "--otlp", "--runs-dir", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    assert f"exported {len(own)} spans of run {summary.run_id}" in result.output
    assert _identity(receiver.spans) == live and {r.scope for r in receiver.spans} == {"pse"}
    assert SECRET.encode() not in b"".join(receiver.bodies)
    printed = CliRunner().invoke(
        app, ["trace", "export", summary.run_id[:24], "--json", "--runs-dir", str(tmp_path)]
    )
    assert printed.exit_code == 0, printed.output
    listed = json.loads(printed.stdout)
    assert sorted(s["name"] for s in listed) == sorted(r.span.name for r in own)
    assert {int(s["context"]["span_id"], 16) for s in listed} == {
        int.from_bytes(r.span.span_id, "big") for r in own
    }


def _scripted(runs_dir: Path, **settings: Any) -> Trace:
    summary = pse.run("code-delivery", runs_dir=runs_dir, **settings)
    assert summary.outcome == "PASSED"
    return load_trace(Path(summary.trace))


def test_content_is_exported_only_when_asked(receiver: OtlpReceiver, tmp_path: Path) -> None:
    trace = _scripted(tmp_path, otel="otlp", otel_content=True)
    own = receiver.own()
    plan = trace.cycles[0].messages[0]
    first = next(
        r for r in own if r.attributes.get("pse.message.index") == 1 and r.attributes["pse.cycle.index"] == 1
    )
    assert json.loads(first.attributes["gen_ai.output.messages"]) == [
        {"role": "assistant", "parts": [{"type": "text", "content": plan.content}]}
    ]
    write = next(r for r in own if r.attributes.get("gen_ai.tool.call.id") == "1.1").attributes
    assert json.loads(write["gen_ai.tool.call.arguments"]) == trace.cycles[0].tool_calls[0].arguments
    assert write["gen_ai.tool.call.result"] == trace.cycles[0].tool_calls[0].output
    assert b"quicksort" in b"".join(receiver.bodies)
    # The same trace without content: none of it.
    bare = trace_spans(trace)
    assert not [s for s in bare if "gen_ai.output.messages" in (s.attributes or {})]
    assert [s.name for s in bare] == [r.span.name for r in own]


def test_the_console_exporter_prints_the_spans_to_stderr(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    _no_otel_variables(monkeypatch)
    _scripted(tmp_path, otel="console")
    printed = capsys.readouterr().err
    assert '"name": "invoke_workflow code-delivery"' in printed and '"name": "cycle 2"' in printed


def test_without_the_extra_an_otel_run_is_a_config_error_naming_the_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.trace", None)  # as if it were not installed
    with pytest.raises(ConfigError, match=r"pip install 'pse\[otel\]'") as caught:
        pse.run("code-delivery", runs_dir=tmp_path, otel="otlp")
    assert OTEL_EXTRA in str(caught.value) and "PSE_OTEL" in str(caught.value)
    assert not [p for p in tmp_path.iterdir() if p.is_dir()]  # nothing left behind
    assert pse.run("code-delivery", runs_dir=tmp_path / "off").outcome == "PASSED"  # off needs nothing


def test_a_collector_that_is_down_never_fails_the_run(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    _no_otel_variables(monkeypatch)
    with OtlpReceiver() as gone:
        endpoint = gone.endpoint
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1")
    with caplog.at_level(logging.WARNING, logger="pse.telemetry"):
        _scripted(tmp_path, otel="otlp")
    assert any("OpenTelemetry export of run" in r.getMessage() for r in caplog.records)


def test_step_runs_put_each_turn_and_call_under_its_step_attempt(tmp_path: Path) -> None:
    summary = pse.run("package-steps", runs_dir=tmp_path)
    trace = load_trace(Path(summary.trace))
    spans = trace_spans(trace)
    by_id = {s.context.span_id: s for s in spans if s.context is not None}
    steps = [s for s in spans if s.name.startswith("step ")]
    assert len(steps) == sum(len(c.steps) for c in trace.cycles) > 1
    for s in spans:
        step = (s.attributes or {}).get("pse.step.id") or (s.attributes or {}).get("pse.tool.step")
        if step is not None and not s.name.startswith("step "):
            assert s.parent is not None and by_id[s.parent.span_id].name == f"step {step}", s.name
        if s.parent is not None:  # every span lies within its parent
            parent = by_id[s.parent.span_id]
            assert parent.start_time <= s.start_time <= s.end_time <= parent.end_time  # type: ignore[operator]
    assert [s.to_json() for s in trace_spans(trace)] == [s.to_json() for s in spans]  # the same, always


def test_the_genai_names_are_the_semantic_conventions_own() -> None:
    from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as semconv

    from pse.telemetry import _attributes as ours

    names = [n for n in ours.__all__ if n.startswith("GEN_AI_")]
    assert len(names) == 17
    for name in names:
        assert getattr(ours, name) == getattr(semconv, name), name
    operations = {op.value for op in semconv.GenAiOperationNameValues}
    assert {ours.OP_CHAT, ours.OP_EXECUTE_TOOL, ours.OP_INVOKE_WORKFLOW} <= operations


def test_secrets_are_scrubbed_from_every_span_even_with_content(tmp_path: Path) -> None:
    """An attack: a secret where content would carry it, in PSE's spans and in a foreign (AutoGen) span."""
    from opentelemetry.sdk.trace import ReadableSpan

    from pse.models import Scrubber
    from pse.telemetry._export import cleaned

    trace = _scripted(tmp_path)
    leaked = f"the key is {SECRET}, and another is sk-{'x' * 24}"
    first = trace.cycles[0].messages[0].model_copy(update={"content": leaked})
    trace.cycles[0].messages[0] = first
    trace.task_message = leaked
    spans = trace_spans(trace, content=True, secrets=[("PSE_API_KEY", SECRET)])
    dumped = "".join(s.to_json() for s in spans)
    assert "the key is [redacted:PSE_API_KEY], and another is ***" in dumped.replace("\\", "")
    assert SECRET not in dumped and "sk-xxxx" not in dumped
    foreign = ReadableSpan("autogen process", attributes={"message": leaked, "topic": SECRET})
    (kept,) = cleaned([foreign], Scrubber([("PSE_API_KEY", SECRET)]), content=True)
    assert dict(kept.attributes or {}) == {
        "message": "the key is [redacted:PSE_API_KEY], and another is ***",
        "topic": "[redacted:PSE_API_KEY]",
    }
    (bare,) = cleaned([foreign], Scrubber(), content=False)
    assert dict(bare.attributes or {}) == {"topic": "***"}  # no content; unconfigured, yet key-shaped
