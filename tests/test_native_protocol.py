"""The native protocol, part by part: what a role is offered, how calls translate, and that they take the
ToolAgent's one path (the same parser errors, policy denials and audit records as DSML).

Whole runs under the native protocol are in `test_native_scenarios.py` and `test_real_provider_e2e.py`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from autogen_core import FunctionCall
from autogen_core.models import (
    AssistantMessage,
    CreateResult,
    FunctionExecutionResultMessage,
    RequestUsage,
    SystemMessage,
    UserMessage,
)

from native_cassettes import native_calls, native_turn
from pse.config import load_settings
from pse.exceptions import ConfigError, ReplayMismatchError
from pse.models import (
    Cassette,
    CassettePlayer,
    CassetteRecorder,
    NativeProtocolClient,
    RecordingChatCompletionClient,
    ScriptedChatCompletionClient,
)
from pse.protocol import FunctionSpec, NativeCall, OutputFunction, read_native, render_native
from pse.roles import TOOL_AGENT, Role
from pse.tasks import TaskRegistry
from pse.toolagent import Policy, ToolExecutor, tool_functions
from pse.tools import Tool

_REGISTRY = TaskRegistry.discover(None)
_CASSETTES = {
    name: json.loads(_REGISTRY.get(name).cassette_path.read_text())["turns"]  # type: ignore[union-attr]
    for name in ("code-delivery", "incident-review")
}
_PLAN = _CASSETTES["code-delivery"][0]["content"]
_USAGE = RequestUsage(prompt_tokens=0, completion_tokens=0)


def _client(role: str, *, turns: list[dict[str, Any]] | None = None) -> NativeProtocolClient:
    player = CassettePlayer(Cassette.model_validate({"turns": turns or []}), strict=False)
    policy = Policy.default(load_settings())
    return NativeProtocolClient(
        ScriptedChatCompletionClient(player, role), role, tool_functions(role, policy)
    )


def _calls(*calls: tuple[str, str]) -> CreateResult:
    made = [FunctionCall(id=f"x{n}", name=name, arguments=args) for n, (name, args) in enumerate(calls)]
    return CreateResult(finish_reason="function_calls", content=made, usage=_USAGE, cached=False)


# --- what a role is offered -------------------------------------------------------------------


def test_each_role_is_offered_exactly_its_granted_tools_then_its_output_functions() -> None:
    offered = {role: [f["name"] for f in _client(role).offer([])] for role in Role}
    assert offered == {
        Role.PLANNER: [Tool.READ_FILE, Tool.LIST_FILES, Tool.BASH, "submit_plan", "block"],
        Role.SPECIALIST: [Tool.READ_FILE, Tool.LIST_FILES, Tool.WRITE_FILE, "submit_report", "block"],
        Role.EVALUATOR: [
            *(Tool.READ_FILE, Tool.LIST_FILES, Tool.BASH, Tool.RUN_PYTEST, Tool.RUN_RUFF, Tool.RUN_CHECK),
            "submit_verdict",
        ],
    }  # no search_knowledge: granted, but no knowledge base registers it here


def test_a_tool_is_a_function_of_string_parameters_with_the_required_ones_required() -> None:
    functions = {f["name"]: f for f in _client(Role.SPECIALIST).offer([])}
    write = functions[Tool.WRITE_FILE]
    assert write["parameters"] == {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "a path relative to the workspace"},
            "content": {"type": "string", "description": "the whole new file content, raw text"},
        },
        "required": ["path", "content"],
        "additionalProperties": False,
    }
    assert write["description"] == "Create or replace a file of the workspace. [read-write, 30/cycle]"
    assert write.get("strict") is False
    listing = functions[Tool.LIST_FILES]["parameters"]
    assert (
        listing["required"] == []
        and "(optional, default '.')" in listing["properties"]["path"]["description"]
    )


def _strict_everywhere(schema: dict[str, Any]) -> bool:
    if schema.get("type") == "object":
        properties = schema["properties"]
        if schema.get("additionalProperties") is not False or schema.get("required") != list(properties):
            return False
        return all(_strict_everywhere(p) for p in properties.values())
    if schema.get("type") == "array":
        return _strict_everywhere(schema["items"])
    return True


def test_output_functions_are_strict_and_their_statuses_enums() -> None:
    outputs = [f for role in Role for f in _client(role).offer([]) if f["name"] in set(OutputFunction)]
    assert all(f.get("strict") is True and _strict_everywhere(dict(f["parameters"])) for f in outputs)
    verdict = next(f for f in outputs if f["name"] == OutputFunction.SUBMIT_VERDICT)["parameters"][
        "properties"
    ]
    assert verdict["status"]["enum"] == ["PASS", "PARTIAL", "FAIL", "BLOCKED"]
    assert verdict["criteria"]["items"]["properties"]["met"] == {
        "type": "boolean",
        "description": "whether the criterion is met",
    }
    block = next(f for f in outputs if f["name"] == OutputFunction.BLOCK)["parameters"]["properties"]
    assert block["reason_code"]["enum"] == [
        "MISSING_DATA",
        "MISSING_PERMISSION",
        "CONFLICTING_CRITERIA",
        "OUT_OF_SCOPE",
    ]


def test_the_verdicts_criterion_ids_are_the_enum_of_the_plan_in_the_request() -> None:
    evaluator = _client(Role.EVALUATOR)
    request = [
        UserMessage(content="the task", source="user"),
        UserMessage(content=_PLAN, source=Role.PLANNER),
    ]
    verdict = next(f for f in evaluator.offer(request) if f["name"] == OutputFunction.SUBMIT_VERDICT)
    criterion = verdict["parameters"]["properties"]["criteria"]["items"]["properties"]["id"]
    assert criterion["enum"] == ["AC1", "AC2", "AC3", "AC4"]
    unknown = next(f for f in evaluator.offer(request[:1]) if f["name"] == OutputFunction.SUBMIT_VERDICT)
    assert "enum" not in unknown["parameters"]["properties"]["criteria"]["items"]["properties"]["id"]


def test_an_evaluator_told_of_findings_is_offered_them_in_its_verdict() -> None:
    from pse.tasks import findings_prompt

    evaluator = _client(Role.EVALUATOR)
    request = [
        UserMessage(content="the task", source="user"),
        UserMessage(content=_PLAN, source=Role.PLANNER),
    ]
    told = [SystemMessage(content="You are the Evaluator.\n\n" + findings_prompt()), *request]

    def verdict(messages: list[Any]) -> dict[str, Any]:
        offered = next(f for f in evaluator.offer(messages) if f["name"] == OutputFunction.SUBMIT_VERDICT)
        assert offered.get("strict") is True and _strict_everywhere(dict(offered["parameters"]))
        return dict(offered["parameters"])

    assert "findings" not in verdict(request)["properties"]  # what every other run is offered, unchanged
    findings = verdict(told)["properties"]["findings"]
    assert list(verdict(told)["properties"]) == ["status", "reason_code", "criteria", "findings", "summary"]
    item = findings["items"]["properties"]
    assert list(item) == ["id", "severity", "text", "criterion", "path", "line"]
    assert item["severity"]["enum"] == ["high", "medium", "low"]
    assert item["criterion"]["enum"] == ["AC1", "AC2", "AC3", "AC4", None]
    assert (item["path"]["type"], item["line"]["type"]) == (["string", "null"], ["integer", "null"])
    assert not any("findings" in f["parameters"]["properties"] for f in _client(Role.PLANNER).offer(told)
                   if f["name"] in set(OutputFunction))  # fmt: skip


def test_a_verdict_with_findings_becomes_its_finding_elements_and_back() -> None:
    from pse.protocol import parse_verdict

    args = {
        "status": "PASS",
        "reason_code": "ALL_MET",
        "criteria": [{"id": "AC1", "met": True, "finding": "3 passed"}],
        "findings": [
            {"id": "F1", "severity": "high", "text": "a < b overflows", "criterion": "AC1", "path": "src/x.py",
             "line": 41},
            {"id": "F2", "severity": "low", "text": "a name", "criterion": None, "path": None, "line": None},
        ],
        "summary": "s",
    }  # fmt: skip
    text = render_native("", [NativeCall("submit_verdict", json.dumps(args))], {"submit_verdict"})
    assert text == (
        '<verdict status="PASS">\n  <reason_code>ALL_MET</reason_code>\n'
        '  <criterion id="AC1" met="true">3 passed</criterion>\n'
        '  <finding id="F1" severity="high" criterion="AC1" path="src/x.py" line="41">a < b overflows</finding>\n'
        '  <finding id="F2" severity="low">a name</finding>\n'  # a null attribute is left out
        "  <summary>s</summary>\n</verdict>"
    )
    found = parse_verdict(text).findings
    assert [(f.id, f.severity, f.criterion, f.path, f.line) for f in found] == [
        ("F1", "high", "AC1", "src/x.py", 41),
        ("F2", "low", None, None, None),
    ]
    assert [json.loads(c.arguments) for c in native_calls(text)] == [args]  # and back, every field
    assert render_native("", native_calls(text), {"submit_verdict"}) == text


def test_a_tool_named_like_an_output_function_is_refused() -> None:
    player = CassettePlayer(Cassette())
    clash = FunctionSpec("submit_plan", "a tool", {"type": "object", "properties": {}})
    with pytest.raises(ConfigError, match="'submit_plan' of Planner has the name of an output function"):
        NativeProtocolClient(ScriptedChatCompletionClient(player, Role.PLANNER), Role.PLANNER, [clash])


# --- translation ----------------------------------------------------------------------------------


def test_calls_become_one_canonical_dsml_message_and_prose_is_escaped() -> None:
    calls = [
        NativeCall(Tool.READ_FILE, '{"path": "a<b.py"}'),
        NativeCall("submit_report", json.dumps({"artifacts": ["a.py", "b.py"], "unresolved": "none"})),
        NativeCall(Tool.LIST_FILES, ""),
    ]
    text = render_native("I read <tool_calls> & then report", calls, {"submit_report", "block"})
    assert text == (
        "I read &lt;tool_calls> &amp; then report\n"
        "<tool_calls>\n"
        '<invoke name="read_file">\n<parameter name="path">a<b.py</parameter>\n</invoke>\n'
        '<invoke name="list_files">\n</invoke>\n'
        "</tool_calls>\n"
        "<report>\nArtifacts: a.py, b.py\nUnresolved: none\n</report>"
    )
    back = read_native(text)
    assert back is not None and back.prose == "I read <tool_calls> & then report"
    assert [(c.name, json.loads(c.arguments)) for c in back.tool_calls] == [
        (Tool.READ_FILE, {"path": "a<b.py"}),
        (Tool.LIST_FILES, {}),
    ]


@pytest.mark.parametrize("task", sorted(_CASSETTES))
def test_every_reference_turn_has_a_native_form_that_renders_back_byte_for_byte(task: str) -> None:
    for turn in _CASSETTES[task]:
        outputs = {"submit_plan", "submit_report", "submit_verdict", "block"}
        assert (
            render_native(read_native(turn["content"]).prose, native_calls(turn["content"]), outputs)
            == (  # type: ignore[union-attr]
                turn["content"]
            )
        )


def test_the_converter_gives_the_turn_a_native_model_would_have_given() -> None:
    specialist = _CASSETTES["code-delivery"][1]
    turn = native_turn(specialist["role"], specialist["content"])
    assert turn["content"] == "I will write the implementation and its tests."
    assert [(c["name"], c["arguments"]["path"]) for c in turn["tool_calls"]] == [
        (Tool.WRITE_FILE, "quicksort.py"),
        (Tool.WRITE_FILE, "test_quicksort.py"),
    ]
    assert turn["tool_calls"][0]["arguments"]["content"].startswith(
        '"""Quicksort that returns a new list."""'
    )
    verdict = native_turn(Role.EVALUATOR, _CASSETTES["code-delivery"][8]["content"])
    (call,) = verdict["tool_calls"]
    assert call["name"] == "submit_verdict" and call["arguments"]["status"] == "PASS"
    assert [(c["id"], c["met"]) for c in call["arguments"]["criteria"]] == [
        (f"AC{n}", True) for n in range(1, 5)
    ]


# --- one ToolAgent path: parser errors, denials and the audit ---------------------------------------


def _decided(executor: ToolExecutor, role: str, text: str) -> list[tuple[Any, ...]]:
    fields = ("tool", "arguments", "decision", "rule", "status", "output")
    return [tuple(getattr(r, f) for f in fields) for r in executor.execute_sync(role, text).records]


@pytest.fixture
def executor(tmp_path: Path) -> ToolExecutor:
    return ToolExecutor(tmp_path, load_settings(sandbox="fallback"))


@pytest.mark.parametrize(
    ("role", "call", "dsml"),
    [
        (Role.SPECIALIST, ("delete_all", '{"path": "x"}'),
         '<invoke name="delete_all"><parameter name="path">x</parameter></invoke>'),
        (Role.SPECIALIST, (Tool.WRITE_FILE, '{"path": "a.py"}'),
         '<invoke name="write_file"><parameter name="path">a.py</parameter></invoke>'),
        (Role.SPECIALIST, (Tool.BASH, '{"command": "ls"}'),
         '<invoke name="bash"><parameter name="command">ls</parameter></invoke>'),
        (Role.EVALUATOR, (Tool.WRITE_FILE, '{"path": "a.py", "content": "x"}'),
         '<invoke name="write_file"><parameter name="path">a.py</parameter>'
         '<parameter name="content">x</parameter></invoke>'),
        (Role.PLANNER, (Tool.READ_FILE, '{"path": "a.py", "mode": "fast"}'),
         '<invoke name="read_file"><parameter name="path">a.py</parameter>'
         '<parameter name="mode">fast</parameter></invoke>'),
    ],
    ids=["unknown-function", "missing-argument", "denied-tool", "denied-write", "unexpected-argument"],
)  # fmt: skip
def test_a_native_call_is_decided_and_audited_exactly_like_its_dsml_form(
    executor: ToolExecutor, role: str, call: tuple[str, str], dsml: str
) -> None:
    native = _client(role).answer(_calls(call)).content
    assert isinstance(native, str)
    assert _decided(executor, role, native) == _decided(executor, role, f"<tool_calls>{dsml}</tool_calls>")
    (record,) = executor.records[-1:]
    assert record.status in ("error", "denied") and record.decision == "denied"


def _is_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return False


@pytest.mark.parametrize(
    ("arguments", "reason"),
    [
        ('{"path": ', "the arguments are not valid JSON (Expecting value at character 9)"),
        ('["a.py"]', "the arguments are an array, not a JSON object"),
        ('{"path": ["a.py"]}', "parameter 'path' is an array, not text"),
        ('{"pa\\"th": "a.py"}', "'pa\"th' is not a parameter name"),
    ],
)
def test_arguments_that_are_no_json_object_of_text_fail_that_call_with_the_reason(
    executor: ToolExecutor, arguments: str, reason: str
) -> None:
    client = _client(Role.PLANNER)
    text = client.answer(_calls((Tool.READ_FILE, arguments), (Tool.LIST_FILES, "{}"))).content
    assert isinstance(text, str)
    batch = executor.execute_sync(Role.PLANNER, text)
    bad, listing = batch.records
    advice = "send one JSON object with a text value per parameter; usage: read_file(path)"
    assert (bad.rule, bad.status, bad.decision) == ("protocol.bad_arguments", "error", "denied")
    assert bad.output == f"read_file: {reason.replace(chr(34), chr(39))}; {advice}"
    assert bad.arguments == {"arguments": arguments}  # the raw text, for the audit
    assert (listing.tool, listing.status) == (Tool.LIST_FILES, "ok")  # the other call runs
    # The model is answered with the same error, as the function result of that very call.
    request = client.request(
        [
            AssistantMessage(content=text, source=Role.PLANNER),
            UserMessage(content=batch.text, source=TOOL_AGENT),
        ]
    )
    assert isinstance(request[0], AssistantMessage) and isinstance(request[1], FunctionExecutionResultMessage)
    # Sent back as a JSON object every provider takes (Ollama's client decodes it): as the model sent it,
    # or, when that was no object, as the audit keeps it.
    sent = arguments if _is_object(arguments) else json.dumps({"arguments": arguments})
    assert [c.arguments for c in request[0].content] == [sent, "{}"]  # type: ignore[union-attr]
    first = request[1].content[0]
    assert (first.content, first.is_error, first.call_id) == (f"[error] {bad.output}", True, "call_1_1")


def test_numbers_booleans_and_nulls_become_text_or_absence(executor: ToolExecutor) -> None:
    text = _client(Role.PLANNER).answer(_calls((Tool.LIST_FILES, '{"path": null}'))).content
    assert isinstance(text, str) and '<invoke name="list_files">\n</invoke>' in text
    args = json.dumps({"query": "pool", "k": 3, "fast": True})
    text = _client(Role.PLANNER).answer(_calls(("search_knowledge", args))).content
    assert '<parameter name="k">3</parameter>' in str(
        text
    ) and '<parameter name="fast">true</parameter>' in str(text)


# --- the request a native model receives ---------------------------------------------------------

_RESULTS = (
    '<tool_results for="Specialist">\n<result index="1" name="read_file" status="ok">text</result>\n'
    '<result index="2" name="bash" status="denied">Specialist may not call bash</result>\n</tool_results>'
)


def test_the_roles_turns_become_calls_and_the_answers_results_with_matching_deterministic_ids() -> None:
    client = _client(Role.SPECIALIST)
    first = client.answer(_calls((Tool.READ_FILE, '{"path": "a"}'), (Tool.BASH, '{"command": "ls"}'))).content
    mixed = client.answer(_calls((Tool.LIST_FILES, "{}"), ("submit_report", '{"artifacts": []}'))).content
    one = '<tool_results for="Specialist">\n<result index="1" name="list_files" status="ok">a</result>\n</tool_results>'
    history = [
        SystemMessage(content="system"),
        UserMessage(content=_PLAN, source=Role.PLANNER),
        AssistantMessage(content=str(first), source=Role.SPECIALIST),
        UserMessage(content=_RESULTS, source=TOOL_AGENT),
        AssistantMessage(content=str(mixed), source=Role.SPECIALIST),
        UserMessage(content=one, source=TOOL_AGENT),
    ]
    request = client.request(history)
    assert request == client.request(history)  # deterministic, ids included
    assert request[:2] == history[:2]  # the system message and another role's final stay as they are
    calls, results = request[2], request[3]
    assert isinstance(calls, AssistantMessage) and isinstance(results, FunctionExecutionResultMessage)
    assert [(c.id, c.name) for c in calls.content] == [("call_1_1", Tool.READ_FILE), ("call_1_2", Tool.BASH)]  # type: ignore[union-attr]
    assert [(r.call_id, r.content, r.is_error) for r in results.content] == [
        ("call_1_1", "text", False),
        ("call_1_2", "[denied] Specialist may not call bash", True),
    ]
    mixed_calls, mixed_results = request[4], request[5]
    assert [c.id for c in mixed_calls.content] == ["call_2_1", "call_2_2"]  # type: ignore[union-attr]
    assert isinstance(mixed_results, FunctionExecutionResultMessage)
    assert [r.content for r in mixed_results.content] == [
        "a",
        "[not taken] a final answer counts only in a reply without tool calls: call submit_report again",
    ]
    sent = json.dumps([m.model_dump() for m in request[2:]])
    assert "<tool_calls" not in sent and "<tool_results" not in sent and "<invoke" not in sent


def test_an_answer_that_is_not_one_result_per_call_reaches_every_call() -> None:
    client = _client(Role.SPECIALIST)
    text = client.answer(_calls((Tool.READ_FILE, '{"path": "a"}'), (Tool.READ_FILE, '{"path": "b"}'))).content
    too_many = (
        '<tool_results for="Specialist">\n<result index="1" name="(parse)" status="error">'
        "too many invokes</result>\n</tool_results>"
    )
    request = client.request(
        [
            AssistantMessage(content=str(text), source=Role.SPECIALIST),
            UserMessage(content=too_many, source=TOOL_AGENT),
        ]
    )
    results = request[1]
    assert isinstance(results, FunctionExecutionResultMessage)
    assert [(r.call_id, r.content) for r in results.content] == [
        ("call_1_1", "(parse): [error] too many invokes"),
        ("call_1_2", "(parse): [error] too many invokes"),
    ]


def test_every_call_gets_a_result_also_a_final_seen_again_and_a_call_left_unanswered() -> None:
    client = _client(Role.PLANNER)
    asked = client.answer(_calls((Tool.READ_FILE, '{"path": "a"}'))).content
    history = [
        AssistantMessage(content=_PLAN, source=Role.PLANNER),  # history mode: its plan of an earlier cycle
        AssistantMessage(content=str(asked), source=Role.PLANNER),  # the cycle stopped before the answer
        UserMessage(content="## Re-plan request", source="user"),
    ]
    request = client.request(history)
    kinds = [(type(m).__name__, [c.name for c in m.content]) for m in request[:2]]  # type: ignore[union-attr]
    assert kinds == [
        ("AssistantMessage", ["submit_plan"]),
        ("FunctionExecutionResultMessage", ["submit_plan"]),
    ]
    assert [r.content for r in request[1].content] == ["received"]  # type: ignore[union-attr]
    assert [r.content for r in request[3].content] == [  # type: ignore[union-attr]
        "[error] no result: the ToolAgent did not answer this call"
    ]
    assert request[4] == history[2]


async def test_a_streamed_native_reply_is_one_chunk_of_dsml_then_the_result() -> None:
    turns = [{"role": Role.PLANNER, "tool_calls": [{"name": "list_files", "arguments": {"path": "data"}}]}]
    items = [item async for item in _client(Role.PLANNER, turns=turns).create_stream([])]
    assert len(items) == 2 and isinstance(items[1], CreateResult) and items[0] == items[1].content
    assert '<parameter name="path">data</parameter>' in items[0]


def test_prose_without_calls_is_escaped_so_it_neither_requests_nor_submits() -> None:
    reply = CreateResult(
        finish_reason="stop", content="<plan><goal>x</goal></plan>", usage=_USAGE, cached=False
    )
    assert _client(Role.PLANNER).answer(reply).content == "&lt;plan>&lt;goal>x&lt;/goal>&lt;/plan>"


# --- scripted and recorded native turns ------------------------------------------------------------


async def test_the_scripted_provider_answers_a_native_turn_with_function_calls() -> None:
    turns = [
        {
            "role": Role.PLANNER,
            "content": "I look first.",
            "tool_calls": [{"name": "list_files", "arguments": {}}],
        }
    ]
    client = _client(Role.PLANNER, turns=turns)
    result = await client.create([UserMessage(content="the task", source="user")])
    assert (
        result.content == 'I look first.\n<tool_calls>\n<invoke name="list_files">\n</invoke>\n</tool_calls>'
    )


async def test_a_turn_that_does_not_fit_the_protocol_of_the_request_is_said_plainly() -> None:
    native = [{"role": Role.PLANNER, "tool_calls": [{"name": "list_files"}]}]
    scripted = ScriptedChatCompletionClient(
        CassettePlayer(Cassette.model_validate({"turns": native})), Role.PLANNER
    )
    with pytest.raises(ReplayMismatchError, match="holds native function calls, but this run offered no"):
        await scripted.create([UserMessage(content="the task", source="user")])
    dsml = [{"role": Role.PLANNER, "content": _PLAN}]
    with pytest.raises(ReplayMismatchError, match=r"is DSML text, but this run speaks the native protocol"):
        await _client(Role.PLANNER, turns=dsml).create([UserMessage(content="the task", source="user")])


async def test_a_recording_keeps_native_calls_as_such(tmp_path: Path) -> None:
    recorder = CassetteRecorder(tmp_path / "out.json", secrets=[("PSE_API_KEY", "sk-secret-value-123")])
    turns = [
        {
            "role": Role.PLANNER,
            "content": "Reading.",
            "tool_calls": [
                {"name": "read_file", "arguments": {"path": "sk-secret-value-123"}},
                {"name": "read_file", "arguments": '{"path": '},
            ],
        }
    ]
    scripted = ScriptedChatCompletionClient(
        CassettePlayer(Cassette.model_validate({"turns": turns})), Role.PLANNER
    )
    player_client = NativeProtocolClient(
        RecordingChatCompletionClient(scripted, recorder, Role.PLANNER), Role.PLANNER, []
    )
    await player_client.create([UserMessage(content="the task", source="user")])
    recorder.save()
    (turn,) = Cassette.from_file(tmp_path / "out.json").turns
    assert turn.content == "Reading."
    assert [(c.name, c.arguments) for c in turn.tool_calls or []] == [
        ("read_file", {"path": "[redacted:PSE_API_KEY]"}),
        ("read_file", '{"path": '),  # not a JSON object: kept as the model sent it
    ]
