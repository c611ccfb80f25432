"""Constrained decoding: each call of a role's model carries the grammar (or JSON schema) of its next turn.

`ConstrainedChatCompletionClient` wraps a real provider's client. Per call it builds the role's
`TurnShape` from the request (`_turn_shape.turn_shape_of`: its granted tools, the plan it works or
judges, what it has done so far in its phase), asks what the server accepts (`ConstraintProbes`: one
probe per server and process), and adds:

* `auto`: the GBNF grammar where the server applies one; nothing where it does not (silently, and
  noted as "none").
* `grammar`: the grammar; a server that applies none fails the call with `ModelUnavailableError`
  naming the setting.
* `json`: the JSON schema (`turn_schema`); the model's JSON answer is turned back into protocol text
  (`protocol_from_json`) before anyone sees it, so the engine, the trace and a recording are unchanged.

A grammar is sized to the call's token limit (`PSE_MODEL_MAX_TOKENS`): every message it accepts has at
most `PSE_CONSTRAIN_CHARS_PER_TOKEN` characters (default 3) per token allowed, so a model that loops
inside a text must close it in time (`pse.protocol.fit_sizes`). When a call is cut at the limit anyway
(`finish_reason` "length": a tokenizer that spends more tokens per character), the role's next call —
the format repair — gets a grammar sized at one character per token, which byte-level tokenizers
cannot overrun on ASCII text.

Each call is noted in a `ConstraintLog` (role → what was sent → calls); the runner keeps it in the
trace's settings under `constrain_used`. The scripted provider and `off` are never wrapped (see
`create_model_client`).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from autogen_core.models import (
    ChatCompletionClient,
    CreateResult,
    LLMMessage,
)

from pse.config import ModelSpec, Settings
from pse.events import ProbeRecord
from pse.exceptions import ConfigError, ModelUnavailableError
from pse.models._probe import SERVER_PROBES, ConstraintProbes, ConstraintSupport, ProbeCall
from pse.models._resilient import public_url
from pse.models._turn_shape import UNKNOWN_GROUND, TaskGround, turn_shape_of
from pse.models._usage import CallUsage, UsageSink
from pse.models._wrapper import CallOptions, WrapperChatCompletionClient
from pse.protocol import (
    ToolSignature,
    TurnShape,
    protocol_from_json,
    turn_grammar,
    turn_schema,
)
from pse.roles import SINGLE_AGENT, Role

__all__ = ["ConstrainedChatCompletionClient", "ConstraintLog", "SupportSource", "with_constraint"]

SupportSource = Callable[[], Awaitable[ConstraintSupport]]
"""Says what the role's server accepts (the factory binds it to `SERVER_PROBES` or a fixed answer)."""


class ConstraintLog:
    """What each role's calls carried: role → `grammar (llama.cpp)`, `json (vllm)` or `none` → calls.

    Args:
        calls: counts to go on from (a resumed run's), copied.
    """

    def __init__(self, calls: Mapping[str, Mapping[str, int]] | None = None) -> None:
        self.calls: dict[str, dict[str, int]] = {role: dict(c) for role, c in (calls or {}).items()}

    def note(self, role: str, sent: str) -> None:
        """Count one call of `role` that carried `sent`."""
        by_kind = self.calls.setdefault(role, {})
        by_kind[sent] = by_kind.get(sent, 0) + 1


@dataclass(frozen=True)
class _Constraint:
    """What one call carries, and how to read its answer."""

    kind: Literal["grammar", "json"] | None
    args: Mapping[str, Any]
    note: str

    def options(self, options: CallOptions) -> CallOptions:
        extra = dict(options.extra_create_args)
        for key, value in self.args.items():
            old = extra.get(key)  # an `extra_body` set before is kept, ours added to it
            extra[key] = (
                {**old, **value} if isinstance(old, Mapping) and isinstance(value, Mapping) else value
            )
        return replace(options, extra_create_args=extra)

    def read(self, result: CreateResult) -> CreateResult:
        if self.kind != "json" or not isinstance(result.content, str):
            return result
        return result.model_copy(update={"content": protocol_from_json(result.content)})


class ConstrainedChatCompletionClient(WrapperChatCompletionClient):
    """Adds the grammar or JSON schema of the role's next message to every call, per `spec.constrain`.

    Args:
        inner: the provider's client (already resilient).
        spec: the role's resolved model settings; `spec.constrain` is auto, grammar or json.
        tools: the tools the role's policy grants, with their parameters.
        support: what the server accepts (asked on every call; the source caches).
        setting: the variable that set the mode, for error messages (`PSE_EVALUATOR_CONSTRAIN`).
        max_invokes: most invokes one message may hold.
        max_tokens: the completion token limit of each call (`PSE_MODEL_MAX_TOKENS`), or None.
        chars_per_token: characters the grammar allows per token of `max_tokens`.
        log: where each call's constraint is noted.
        questions: the Planner may send a `<clarification>` (PSE_PLANNER_QUESTIONS).
        ground: what the task put in the workspace and expects out of it (`TaskGround`): a role
            whose outputs are all new, one still to write, is offered no look.
    """

    def __init__(
        self,
        inner: ChatCompletionClient,
        spec: ModelSpec,
        tools: Sequence[ToolSignature],
        support: SupportSource,
        *,
        setting: str = "PSE_CONSTRAIN",
        max_invokes: int = 16,
        max_tokens: int | None = None,
        chars_per_token: int = 3,
        log: ConstraintLog | None = None,
        questions: bool = False,
        ground: TaskGround = UNKNOWN_GROUND,
    ) -> None:
        super().__init__(inner)
        self.questions = questions
        self.ground = ground
        self.spec = spec
        self.tools = tuple(tools)
        self.support = support
        self.setting = setting
        self.max_invokes = max_invokes
        self.max_tokens = max_tokens
        self.chars_per_token = chars_per_token
        self.log = log if log is not None else ConstraintLog()
        self._cut = False  # the last call ended at the token limit

    def _done(self, result: CreateResult, constraint: _Constraint) -> CreateResult:
        self.log.note(self.spec.role, constraint.note)
        self._cut = result.finish_reason == "length"
        return constraint.read(result)

    async def _create(self, messages: Sequence[LLMMessage], options: CallOptions) -> CreateResult:
        constraint = await self._constraint(messages)
        result = await self.inner.create(messages, **constraint.options(options).as_kwargs())
        return self._done(result, constraint)

    async def _create_stream(
        self, messages: Sequence[LLMMessage], options: CallOptions
    ) -> AsyncGenerator[str | CreateResult, None]:
        constraint = await self._constraint(messages)
        async for item in self.inner.create_stream(messages, **constraint.options(options).as_kwargs()):
            if isinstance(item, CreateResult):
                item = self._done(item, constraint)
            yield item

    def shape(self, messages: Sequence[LLMMessage]) -> TurnShape:
        """What the role may send in answer to `messages`."""
        shape = turn_shape_of(
            self.spec,
            self.tools,
            messages,
            max_invokes=self.max_invokes,
            questions=self.questions,
            ground=self.ground,
        )
        if self.max_tokens is None:
            return shape
        # After a cut, the tightest sizing that still fits a message (a tiny limit may allow only 3 a token).
        for per_token in range(1 if self._cut else self.chars_per_token, max(self.chars_per_token, 3) + 1):
            sized = replace(shape, max_chars=self.max_tokens * per_token)
            try:
                sized.sizes()
            except ValueError:
                continue
            return sized
        return sized  # nothing fits: `turn_grammar` says so

    async def _constraint(self, messages: Sequence[LLMMessage]) -> _Constraint:
        wanted = self.spec.constrain
        try:
            support = await self.support()
        except ModelUnavailableError:
            if wanted == "auto":  # the call itself will say what is wrong with the server, after its retries
                return _Constraint(None, {}, "none")
            raise
        kind: Literal["grammar", "json"] | None = None
        if wanted == "auto":
            kind = "grammar" if support.grammar else None
        elif wanted in ("grammar", "json"):
            if not (support.grammar if wanted == "grammar" else support.json):
                raise ModelUnavailableError(self._unsupported(wanted, support))
            kind = wanted
        if kind is None:
            return _Constraint(None, {}, "none")
        shape = self.shape(messages)
        try:
            constraint = turn_grammar(shape) if kind == "grammar" else turn_schema(shape)
        except ValueError as exc:
            raise ConfigError(
                f"{self.setting}={wanted}: {exc}, with PSE_MODEL_MAX_TOKENS={self.max_tokens}. Raise "
                f"PSE_MODEL_MAX_TOKENS, or set {self.setting}=off."
            ) from exc
        return _Constraint(kind, support.request_args(kind, constraint), f"{kind} ({support.dialect})")

    def _unsupported(self, wanted: str, support: ConstraintSupport) -> str:
        what = "GBNF grammar" if wanted == "grammar" else "JSON schema"
        return (
            f"{self.setting}={wanted}, but {self.spec.role}'s server {support.server} takes no {what}: "
            f"{support.detail}. Set {self.setting}=auto (a grammar where the server applies one, else "
            "nothing) or off, or serve the model with llama.cpp, vLLM or SGLang."
        )


def with_constraint(
    client: ChatCompletionClient,
    settings: Settings,
    spec: ModelSpec,
    tools: Sequence[ToolSignature],
    *,
    log: ConstraintLog | None = None,
    probes: ConstraintProbes = SERVER_PROBES,
    ground: TaskGround = UNKNOWN_GROUND,
    meter: UsageSink | None = None,
) -> ChatCompletionClient:
    """`client` constrained as `spec.constrain` (auto, grammar or json) says for a real provider, or
    `client` itself where auto cannot apply (Ollama, OpenAI's own API, PSE_PROTOCOL=native). A probe
    of the server this role's call needs is reported to `meter` as a call of the role (`CallUsage.probe`).

    Raises:
        ConfigError: a constraint the provider can never take (a grammar for Ollama; any with
            PSE_PROTOCOL=native).
    """
    own = settings.role(spec.role).constrain is not None
    named = Role.SPECIALIST if spec.role == SINGLE_AGENT else spec.role  # the Agent has the Specialist's
    setting = f"PSE_{named.upper()}_CONSTRAIN" if own else "PSE_CONSTRAIN"
    explicit = spec.constrain != "auto"
    if settings.protocol != "dsml":
        if explicit:
            raise ConfigError(
                f"{setting}={spec.constrain} constrains the XML protocol; with "
                f"PSE_PROTOCOL={settings.protocol} tools are called natively. Set {setting}=auto or off, "
                "or PSE_PROTOCOL=dsml."
            )
        return client
    server = public_url(spec.base_url, spec.provider)
    if spec.provider == "ollama":
        if spec.constrain == "grammar":
            raise ConfigError(
                f"{setting}=grammar, but Ollama ({server}) takes no grammar, only a JSON schema: set "
                f"{setting}=json, auto or off, or serve the model with llama.cpp, vLLM or SGLang."
            )
        if not explicit:
            return client  # auto means a grammar; Ollama has none
        fixed = ConstraintSupport(server, "ollama", "Ollama reads a JSON schema in `format`")
        return _wrap(client, settings, spec, tools, _answer(fixed), setting, log, ground)
    if spec.base_url is None:
        none = ConstraintSupport(server, None, "OpenAI's own API takes no grammar field (no base URL is set)")
        return (
            client
            if not explicit
            else _wrap(client, settings, spec, tools, _answer(none), setting, log, ground)
        )
    base_url = spec.base_url
    key = spec.api_key.get_secret_value() if spec.api_key is not None else None

    def probed(call: ProbeCall) -> None:
        if meter is None:
            return
        learned = call.support.detail if call.support is not None else call.note
        record = ProbeRecord(
            role=spec.role, server=call.server, model=call.model, prompt_tokens=call.prompt,
            completion_tokens=call.completion, estimated=call.estimated, reply=call.reply, learned=learned,
            ms=call.ms,
        )  # fmt: skip
        note = f"grammar-support probe of {call.server}: {learned}"
        calls = 1 if call.sent else 0  # a probe that never reached the server is kept, not counted
        meter(
            CallUsage(
                spec.role, call.prompt, call.completion, call.estimated, note=note, calls=calls, probe=record
            )
        )

    async def support() -> ConstraintSupport:
        return await probes.support(
            base_url, spec.model, api_key=key, timeout_s=settings.model_timeout_s, on_probe=probed
        )

    return _wrap(client, settings, spec, tools, support, setting, log, ground)


def _answer(fixed: ConstraintSupport) -> SupportSource:
    async def support() -> ConstraintSupport:
        return fixed

    return support


def _wrap(
    client: ChatCompletionClient,
    settings: Settings,
    spec: ModelSpec,
    tools: Sequence[ToolSignature],
    support: SupportSource,
    setting: str,
    log: ConstraintLog | None,
    ground: TaskGround = UNKNOWN_GROUND,
) -> ChatCompletionClient:
    return ConstrainedChatCompletionClient(
        client,
        spec,
        tools,
        support,
        setting=setting,
        max_invokes=settings.max_invokes_per_message,
        max_tokens=settings.model_max_tokens,
        chars_per_token=settings.constrain_chars_per_token,
        log=log,
        questions=settings.planner_questions and spec.role == Role.PLANNER,
        ground=ground,
    )
