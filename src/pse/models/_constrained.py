"""Constrained decoding: each call of a role's model carries the grammar (or JSON schema) of its next turn.

`ConstrainedChatCompletionClient` wraps a real provider's client. Per call it builds the role's
`TurnShape` (its granted tools; for the Evaluator, the criteria of the plan in the messages it is
sent), asks what the server accepts (`ConstraintProbes`: one probe per server and process), and adds:

* `auto`: the GBNF grammar where the server applies one; nothing where it does not (silently, and
  noted as "none").
* `grammar`: the grammar; a server that applies none fails the call with `ModelUnavailableError`
  naming the setting.
* `json`: the JSON schema (`turn_schema`); the model's JSON answer is turned back into protocol text
  (`protocol_from_json`) before anyone sees it, so the engine, the trace and a recording are unchanged.

Each call is noted in a `ConstraintLog` (role → what was sent → calls); the runner keeps it in the
trace's settings under `constrain_used`. The scripted provider and `off` are never wrapped (see
`create_model_client`).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from autogen_core.models import ChatCompletionClient, CreateResult, LLMMessage, SystemMessage

from pse.config import ModelSpec, Settings
from pse.exceptions import ConfigError, ModelUnavailableError
from pse.models._digest import message_texts
from pse.models._probe import SERVER_PROBES, ConstraintProbes, ConstraintSupport
from pse.models._resilient import public_url
from pse.models._wrapper import CallOptions, WrapperChatCompletionClient
from pse.protocol import (
    ToolSignature,
    TurnShape,
    plan_criteria,
    protocol_from_json,
    turn_grammar,
    turn_schema,
)
from pse.roles import Role

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
        log: where each call's constraint is noted.
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
        log: ConstraintLog | None = None,
    ) -> None:
        super().__init__(inner)
        self.spec = spec
        self.tools = tuple(tools)
        self.support = support
        self.setting = setting
        self.max_invokes = max_invokes
        self.log = log if log is not None else ConstraintLog()

    async def _create(self, messages: Sequence[LLMMessage], options: CallOptions) -> CreateResult:
        constraint = await self._constraint(messages)
        result = await self.inner.create(messages, **constraint.options(options).as_kwargs())
        self.log.note(self.spec.role, constraint.note)
        return constraint.read(result)

    async def _create_stream(
        self, messages: Sequence[LLMMessage], options: CallOptions
    ) -> AsyncGenerator[str | CreateResult, None]:
        constraint = await self._constraint(messages)
        async for item in self.inner.create_stream(messages, **constraint.options(options).as_kwargs()):
            if isinstance(item, CreateResult):
                self.log.note(self.spec.role, constraint.note)
                item = constraint.read(item)
            yield item

    def shape(self, messages: Sequence[LLMMessage]) -> TurnShape:
        """What the role may send in answer to `messages`."""
        criteria = None
        if self.spec.role == Role.EVALUATOR:
            criteria = plan_criteria(message_texts([m for m in messages if not isinstance(m, SystemMessage)]))
        return TurnShape(self.spec.role, self.tools, criteria, self.max_invokes)

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
        constraint = turn_grammar(shape) if kind == "grammar" else turn_schema(shape)
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
) -> ChatCompletionClient:
    """`client` constrained as `spec.constrain` (auto, grammar or json) says for a real provider, or
    `client` itself where auto cannot apply (Ollama, OpenAI's own API, PSE_PROTOCOL=native).

    Raises:
        ConfigError: a constraint the provider can never take (a grammar for Ollama; any with
            PSE_PROTOCOL=native).
    """
    own = settings.role(spec.role).constrain is not None
    setting = f"PSE_{spec.role.upper()}_CONSTRAIN" if own else "PSE_CONSTRAIN"
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
        return _wrap(client, settings, spec, tools, _answer(fixed), setting, log)
    if spec.base_url is None:
        none = ConstraintSupport(server, None, "OpenAI's own API takes no grammar field (no base URL is set)")
        return client if not explicit else _wrap(client, settings, spec, tools, _answer(none), setting, log)
    base_url = spec.base_url
    key = spec.api_key.get_secret_value() if spec.api_key is not None else None

    async def support() -> ConstraintSupport:
        return await probes.support(base_url, spec.model, api_key=key, timeout_s=settings.model_timeout_s)

    return _wrap(client, settings, spec, tools, support, setting, log)


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
) -> ChatCompletionClient:
    return ConstrainedChatCompletionClient(
        client, spec, tools, support, setting=setting, max_invokes=settings.max_invokes_per_message, log=log
    )
