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

import dataclasses
import json
from collections.abc import AsyncGenerator, Sequence
from typing import cast

from autogen_core import FunctionCall
from autogen_core.models import (
    AssistantMessage,
    ChatCompletionClient,
    CreateResult,
    FunctionExecutionResult,
    FunctionExecutionResultMessage,
    LLMMessage,
    UserMessage,
)
from autogen_core.tools import ParametersSchema, ToolSchema

from pse.exceptions import ConfigError, ProtocolError
from pse.models._wrapper import CallOptions, WrapperChatCompletionClient
from pse.protocol import (
    OUTPUTS,
    FunctionSpec,
    NativeCall,
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
        return [_schema(spec) for spec in (*self.tools, *output_functions(self.role, ids))]

    def request(self, messages: Sequence[LLMMessage]) -> list[LLMMessage]:
        """The messages as the provider gets them: the role's turns as calls, the answers as results."""
        out: list[LLMMessage] = []
        pending: list[FunctionCall] = []  # the calls of the last turn, waiting for the ToolAgent's answer
        asked = 0  # how many of `pending` are tool calls (the rest are output functions, never answered)
        turns = 0
        for message in messages:
            if isinstance(message, AssistantMessage) and message.source == self.role:
                out += self._unanswered(pending, asked)
                pending, asked = [], 0
                turn = read_native(message.content) if isinstance(message.content, str) else None
                if turn is None:
                    out.append(message)
                elif not turn.tool_calls and not turn.outputs:
                    out.append(AssistantMessage(content=turn.prose, source=message.source))
                else:
                    turns += 1
                    made = [*turn.tool_calls, *turn.outputs]
                    calls = [
                        FunctionCall(
                            id=f"call_{turns}_{n}", name=call.name, arguments=_sendable(call.arguments)
                        )
                        for n, call in enumerate(made, start=1)
                    ]
                    out.append(
                        AssistantMessage(content=calls, source=message.source, thought=turn.prose or None)
                    )
                    if turn.tool_calls:
                        pending, asked = calls, len(turn.tool_calls)
                    else:  # a final answer seen again (history mode): it was taken
                        out.append(
                            FunctionExecutionResultMessage(content=[_result(c, _RECEIVED) for c in calls])
                        )
                continue
            answered = self._answered(message, pending, asked)
            if answered is not None:
                out.append(answered)
            else:
                out += self._unanswered(pending, asked)
                out.append(message)
            pending, asked = [], 0
        return out + self._unanswered(pending, asked)

    def _answered(
        self, message: LLMMessage, pending: list[FunctionCall], asked: int
    ) -> FunctionExecutionResultMessage | None:
        """The ToolAgent's answer to the pending calls as their results; None when `message` is none."""
        if not pending or not isinstance(message, UserMessage) or message.source != TOOL_AGENT:
            return None
        if not isinstance(message.content, str):
            return None
        results = function_results(message.content, self.role, asked)
        if results is None:
            return None
        answers = [_result(call, text, error) for call, (text, error) in zip(pending, results, strict=False)]
        return FunctionExecutionResultMessage(
            content=answers + [_result(c, _not_taken(c.name)) for c in pending[asked:]]
        )

    @staticmethod
    def _unanswered(pending: list[FunctionCall], asked: int) -> list[LLMMessage]:
        """Results for calls no answer followed (the provider needs one per call)."""
        if not pending:
            return []
        results = [_result(c, _NO_RESULT, True) for c in pending[:asked]]
        results += [_result(c, _not_taken(c.name)) for c in pending[asked:]]
        return [FunctionExecutionResultMessage(content=results)]

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
        native = dataclasses.replace(options, tools=self.offer(messages), tool_choice="required")
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


def _sendable(arguments: str) -> str:
    """Arguments every provider takes back: a JSON object; unreadable ones as the audit keeps them."""
    try:
        readable = isinstance(json.loads(arguments), dict)
    except json.JSONDecodeError:
        readable = False
    return arguments if readable else json.dumps({"arguments": arguments}, ensure_ascii=False)


def _result(call: FunctionCall, text: str, error: bool = False) -> FunctionExecutionResult:
    return FunctionExecutionResult(content=text, name=call.name, call_id=call.id, is_error=error)
