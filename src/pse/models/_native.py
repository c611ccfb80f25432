"""The native protocol as a decorating client: function calls with the provider, DSML with everyone else.

```
AssistantAgent of a role          given no tools: it never executes anything, it only passes text on
   │  DSML text (the role's turns, the ToolAgent's <tool_results>)
NativeProtocolClient
   │  request:  the role's own turns → assistant messages of FunctionCalls (ids call_<turn>_<n>),
   │            the ToolAgent's answers → FunctionExecutionResultMessages with the same ids,
   │            tools = the role's granted tools + its output functions, tool_choice="required"
   │  response: FunctionCalls → one message of canonical DSML (`pse.protocol.render_native`)
provider client (recording, retries, OpenAI | Ollama | scripted)
```

So the ToolAgent parses, decides, audits and budgets a native call exactly as it does a DSML one, the
engine reads the same `<plan>`, `<verdict>` and `<blocked>`, and the trace holds one format. The
translation is deterministic, both ways: the same run sends the same request, ids included, which is
what strict replay of a recorded cassette needs.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass, replace
from typing import cast

from autogen_core import FunctionCall
from autogen_core.models import (
    AssistantMessage,
    ChatCompletionClient,
    CreateResult,
    FunctionExecutionResult,
    FunctionExecutionResultMessage,
    LLMMessage,
    SystemMessage,
    UserMessage,
)
from autogen_core.tools import ParametersSchema, ToolSchema

from pse.exceptions import ConfigError, ProtocolError
from pse.models._wrapper import CallOptions, WrapperChatCompletionClient
from pse.protocol import (
    OUTPUTS,
    FunctionSpec,
    NativeCall,
    asks_findings,
    escape_prose,
    function_results,
    output_functions,
    parse_plan,
    read_native,
    render_native,
)
from pse.roles import TOOL_AGENT, Role

__all__ = ["NativeProtocolClient"]

_NO_RESULT = "[error] no result: the ToolAgent did not answer this call"
_RECEIVED = "received"


def _not_taken(name: str) -> str:
    return f"[not taken] a final answer counts only in a reply without tool calls: call {name} again"


def _schema(spec: FunctionSpec) -> ToolSchema:
    parameters = cast(ParametersSchema, spec.parameters)
    return ToolSchema(name=spec.name, description=spec.description, parameters=parameters, strict=spec.strict)


def _plan_ids(messages: Sequence[LLMMessage]) -> list[str]:
    """The criterion ids of the last plan a request holds (the Evaluator's brief or the Planner's final)."""
    for message in reversed(messages):
        if (
            isinstance(message, UserMessage)
            and isinstance(message.content, str)
            and "<plan>" in message.content
        ):
            try:
                return [c.id for c in parse_plan(message.content).criteria]
            except ProtocolError:
                continue
    return []


class NativeProtocolClient(WrapperChatCompletionClient):
    """Offers `role` its tools and output functions natively, and turns the calls back into DSML.

    Args:
        inner: the provider's client; its model info must declare function calling.
        role: whose client this is (its output functions, and the ToolAgent answers addressed to it).
        tools: the role's granted tools as functions (`pse.toolagent.tool_functions`).

    Raises:
        ConfigError: a tool has the name of one of the role's output functions.
    """

    def __init__(self, inner: ChatCompletionClient, role: str, tools: Sequence[FunctionSpec]) -> None:
        super().__init__(inner)
        self.role = role
        self.tools = tuple(tools)
        self._outputs = frozenset(str(name) for name in OUTPUTS.get(role, ()))
        clash = sorted(self._outputs & {tool.name for tool in self.tools})
        if clash:
            raise ConfigError(
                f"tool {clash[0]!r} of {role} has the name of an output function of the native protocol; "
                "rename the tool, or use PSE_PROTOCOL=dsml"
            )

    def offer(self, messages: Sequence[LLMMessage]) -> list[ToolSchema]:
        """The functions offered with a request: the role's tools, then its output functions."""
        ids = _plan_ids(messages) if self.role == Role.EVALUATOR else []
        instructions = [str(m.content) for m in messages if isinstance(m, SystemMessage)]
        findings = self.role == Role.EVALUATOR and asks_findings(instructions)
        return [_schema(spec) for spec in (*self.tools, *output_functions(self.role, ids, findings=findings))]

    def request(self, messages: Sequence[LLMMessage]) -> list[LLMMessage]:
        """The messages as the provider gets them: the role's turns as calls, the answers as results."""
        out: list[LLMMessage] = []
        waiting: _Asked | None = None
        turns = 0
        for message in messages:
            if waiting is not None:
                answers = self._answers(message, waiting.tools)
                out.append(waiting.unanswered() if answers is None else waiting.results(answers))
                waiting = None
                if answers is not None:
                    continue
            if isinstance(message, AssistantMessage) and message.source == self.role:
                turns += 1
                converted, waiting = _turn(message, turns)
                out += converted
            else:
                out.append(message)
        return out if waiting is None else [*out, waiting.unanswered()]

    def _answers(self, message: LLMMessage, tools: int) -> list[tuple[str, bool]] | None:
        """What the ToolAgent answered each tool call, when `message` is its answer to this role."""
        if (
            isinstance(message, UserMessage)
            and message.source == TOOL_AGENT
            and isinstance(message.content, str)
        ):
            return function_results(message.content, self.role, tools)
        return None

    def answer(self, result: CreateResult) -> CreateResult:
        """The provider's reply as the DSML message the agent passes on (prose alone is escaped)."""
        if isinstance(result.content, str):
            return result.model_copy(update={"content": escape_prose(result.content)})
        calls = [NativeCall(call.name, call.arguments) for call in result.content]
        text = render_native(result.thought or "", calls, self._outputs)
        return result.model_copy(update={"content": text, "thought": None})

    def _native(
        self, messages: Sequence[LLMMessage], options: CallOptions
    ) -> tuple[list[LLMMessage], CallOptions]:
        if options.tools:
            raise ValueError("NativeProtocolClient offers the role's functions itself; pass no tools to it")
        native = replace(options, tools=self.offer(messages), tool_choice="required")
        return self.request(messages), native

    async def _create(self, messages: Sequence[LLMMessage], options: CallOptions) -> CreateResult:
        request, native = self._native(messages, options)
        return self.answer(await self.inner.create(request, **native.as_kwargs()))

    async def _create_stream(
        self, messages: Sequence[LLMMessage], options: CallOptions
    ) -> AsyncGenerator[str | CreateResult, None]:
        # The reply is known only whole (calls are rendered together), so it streams as one chunk.
        request, native = self._native(messages, options)
        final: CreateResult | None = None
        async for item in self.inner.create_stream(request, **native.as_kwargs()):
            if isinstance(item, CreateResult):
                final = item
        if final is None:
            raise RuntimeError(f"{self.role}'s model stream ended without a result")
        answer = self.answer(final)
        yield str(answer.content)
        yield answer


@dataclass(frozen=True)
class _Asked:
    """A turn's calls waiting for the ToolAgent's answer; the first `tools` are tool calls."""

    calls: list[FunctionCall]
    tools: int

    def results(self, answers: Sequence[tuple[str, bool]]) -> FunctionExecutionResultMessage:
        """One result per call (the provider needs every one): the answers, then the finals not taken."""
        made = [_result(call, text, error) for call, (text, error) in zip(self.calls, answers, strict=False)]
        finals = [_result(call, _not_taken(call.name)) for call in self.calls[self.tools :]]
        return FunctionExecutionResultMessage(content=made + finals)

    def unanswered(self) -> FunctionExecutionResultMessage:
        """The results when no answer followed (the cycle stopped in between)."""
        return self.results([(_NO_RESULT, True)] * self.tools)


def _turn(message: AssistantMessage, number: int) -> tuple[list[LLMMessage], _Asked | None]:
    """The role's `number`th turn of the request as the provider gets it, and its calls still to answer."""
    turn = read_native(message.content) if isinstance(message.content, str) else None
    if turn is None:
        return [message], None
    made = [*turn.tool_calls, *turn.outputs]
    if not made:
        return [AssistantMessage(content=turn.prose, source=message.source)], None
    calls = [
        FunctionCall(id=f"call_{number}_{n}", name=call.name, arguments=_sendable(call.arguments))
        for n, call in enumerate(made, start=1)
    ]
    sent = AssistantMessage(content=calls, source=message.source, thought=turn.prose or None)
    if turn.tool_calls:
        return [sent], _Asked(calls, len(turn.tool_calls))
    # A final answer seen again (history mode): it was taken.
    return [sent, FunctionExecutionResultMessage(content=[_result(c, _RECEIVED) for c in calls])], None


def _sendable(arguments: str) -> str:
    """Arguments every provider takes back: a JSON object; unreadable ones as the audit keeps them."""
    try:
        readable = isinstance(json.loads(arguments), dict)
    except json.JSONDecodeError:
        readable = False
    return arguments if readable else json.dumps({"arguments": arguments}, ensure_ascii=False)


def _result(call: FunctionCall, text: str, error: bool = False) -> FunctionExecutionResult:
    return FunctionExecutionResult(content=text, name=call.name, call_id=call.id, is_error=error)
