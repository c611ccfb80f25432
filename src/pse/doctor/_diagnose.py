"""`diagnose(settings)`: is each role's configured model usable by PSE, and if not, what to set.

Roles that share a model (same provider, model, base URL and key) are checked once. For each model:
the server's facts (reachable, latency, listed models, context window), what it takes (a GBNF grammar,
native tool calls), and the two protocol exchanges (a tool call, a verdict), unconstrained and — when
this PSE sends a constraint (`pse_sends`) — constrained. A model is *usable* when it is reachable, is
the model the server serves, and wrote a valid tool call (and, for the Evaluator, a valid verdict) in
the mode PSE will use for it. Exit code: 0 all usable, 1 something unusable, 2 a configuration error.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, computed_field

from pse.config import ModelSpec, Settings, with_overrides
from pse.doctor._exchange import EXCHANGE_TOOL, Exchange, tool_call_exchange, verdict_exchange
from pse.doctor._server import (
    Probe,
    grammar_support,
    largest_grammar_support,
    native_tool_support,
    server_facts,
)
from pse.doctor._wire import WireFeatures, pse_sends
from pse.exceptions import ConfigError, PSEError, ToolInfrastructureError, UserError
from pse.models import SERVER_PROBES, create_model_client
from pse.protocol import TurnShape, turn_grammar
from pse.roles import ROLES, Role
from pse.toolagent import sandbox_for
from pse.tools import builtin_tools

__all__ = ["DOCTOR_MAX_TOKENS", "DoctorReport", "ExchangeResult", "ModelCheck", "diagnose", "largest_grammar"]

DOCTOR_MAX_TOKENS = 200
"""Completion-token cap of each exchange (a tool call or a one-criterion verdict needs under 100)."""
_MODES = ("unconstrained", "constrained")


class ExchangeResult(BaseModel):
    """One exchange as reported: valid or not (None: not run), and what happened."""

    valid: bool | None = None
    detail: str = ""


class ModelCheck(BaseModel):
    """Everything the doctor found for one model and the roles that use it."""

    roles: list[str]
    provider: str
    model: str
    url: str
    reachable: bool = False
    latency_ms: float | None = None
    served: bool | None = None
    context_tokens: int | None = None
    grammar: str = "unknown"
    grammar_detail: str = ""
    largest_grammar: str = "unknown"
    """Whether the server took the largest grammar a run of these roles sends: yes, no, unknown."""
    largest_grammar_detail: str = ""
    native_tools: str = "unknown"
    native_tools_detail: str = ""
    tokens_per_s: float | None = None
    mode: str = "unconstrained"
    """The mode PSE will use for these roles: unconstrained or constrained."""
    tool_call: dict[str, ExchangeResult] = Field(default_factory=dict)
    verdict: dict[str, ExchangeResult] = Field(default_factory=dict)
    usable: bool = False
    problems: list[str] = Field(default_factory=list)
    """What makes it unusable, each with what to set."""
    advice: list[str] = Field(default_factory=list)
    """What would help, without making it unusable."""


class SandboxCheck(BaseModel):
    """Can tool commands run for a run in the configured runs folder, and how isolated are they."""

    mode: str | None = None
    """bwrap or fallback: what `PSE_SANDBOX` resolves to here (None: no sandbox could be made)."""
    uid: int | None = None
    runs_dir: str = ""
    problem: str | None = None
    """Why no tool command could run (the runs folder is out of the sandbox's reach, ...), with the fix."""
    warning: str | None = None
    """What the sandbox does not protect here (fallback), as every run would print it."""


def check_sandbox(settings: Settings) -> SandboxCheck:
    """Make the sandbox a run in `settings.runs_dir` would get, on a scratch workspace there, and say
    whether a command can start in it (the folder is removed after; nothing else is written)."""
    runs = Path(settings.runs_dir).resolve()
    found = SandboxCheck(runs_dir=str(runs))
    base = runs
    while not base.exists() and base != base.parent:
        base = base.parent  # the runs folder does not exist yet: a run would create it under here
    try:
        scratch = Path(tempfile.mkdtemp(prefix=".pse-doctor-", dir=base))
    except OSError as exc:
        found.problem = (
            f"cannot create a run folder in {base}: {exc}; choose a runs folder you may write (--runs-dir)"
        )
        return found
    try:
        scratch.chmod(0o755)
        sandbox = sandbox_for(scratch, settings)
        found.mode, found.uid = sandbox.mode, sandbox.identity.uid
        found.problem = sandbox.unreachable
        found.warning = None if sandbox.unreachable else sandbox.warning
    except (ConfigError, ToolInfrastructureError) as exc:
        found.problem = str(exc)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return found


class DoctorReport(BaseModel):
    """The doctor's findings: configuration errors, one check per model, what this PSE sends."""

    config_errors: list[str] = Field(default_factory=list)
    sandbox: SandboxCheck = Field(default_factory=SandboxCheck)
    checks: list[ModelCheck] = Field(default_factory=list)
    pse_constraint: str | None = None
    """The request field PSE constrains decoding with (PSE_CONSTRAIN=grammar), None if it sends none."""
    pse_native_tools: bool = False
    """Whether PSE_PROTOCOL=native offers the model native tools in this build."""

    @computed_field  # type: ignore[prop-decorator]
    @property
    def exit_code(self) -> int:
        """2 on a configuration error, 1 when a model is unusable, else 0."""
        if self.config_errors:
            return 2
        if self.sandbox.problem is not None:
            return 1
        return 0 if self.checks and all(c.usable for c in self.checks) else 1


def _variable(roles: list[str], name: str) -> str:
    """`PSE_MODEL` when every role shares the model, else the roles' own variables."""
    if len(roles) == len(ROLES):
        return f"PSE_{name}"
    return " / ".join(f"PSE_{r.upper()}_{name}" for r in roles)


def _all_roles(**values: object) -> dict[str, object]:
    """The same per-role override for every role, so no role's own setting survives it."""
    return {f"{role.lower()}_{key}": value for role in ROLES for key, value in values.items()}


async def diagnose(settings: Settings) -> DoctorReport:
    """Check every role's model (see the module docstring)."""
    report = DoctorReport(sandbox=check_sandbox(settings))
    quick = with_overrides(settings, "pse doctor", model_max_tokens=DOCTOR_MAX_TOKENS, model_max_retries=1)
    groups: dict[tuple[Any, ...], list[str]] = {}
    specs: dict[tuple[Any, ...], ModelSpec] = {}
    scripted = [role for role in ROLES if settings.model_spec(role).provider == "scripted"]
    if scripted:
        every = len(scripted) == len(ROLES)
        report.config_errors.append(
            f"no model configured for {'any role' if every else ', '.join(scripted)} (the scripted provider "
            "only replays cassettes): set PSE_PROVIDER=openai PSE_BASE_URL=http://127.0.0.1:8000/v1 "
            "PSE_MODEL=<served name>"
            + ("" if every else f", or {_variable(scripted, 'PROVIDER')} and the like for these roles")
            + "; `python -m pse.local` serves the packaged local models there"
        )
    for role in (r for r in ROLES if r not in scripted):
        spec = settings.model_spec(role)
        try:
            await create_model_client(quick, role).close()  # the same configuration errors a run would meet
        except UserError as exc:
            report.config_errors.append(f"{role}: {exc}")
            continue
        key = (
            spec.provider,
            spec.model,
            spec.base_url,
            spec.api_key.get_secret_value() if spec.api_key else None,
        )
        groups.setdefault(key, []).append(role)
        specs.setdefault(key, spec)
        if spec.provider == "openai" and spec.base_url:  # what a run learned of it is learned again
            SERVER_PROBES.forget(spec.base_url)
    if not groups:
        return report
    constrained, native = await asyncio.gather(
        _wire(quick, constrain="grammar", **_all_roles(constrain="grammar")),
        _wire(quick, protocol="native"),
    )
    report.pse_constraint = constrained.constraint if constrained is not None else None
    report.pse_native_tools = native.tools if native is not None else False
    for key, roles in groups.items():
        check = await _check(quick, specs[key], roles, report.pse_constraint)
        if check.grammar == "yes" and report.pse_constraint == "grammar" and specs[key].constrain != "off":
            await _largest_grammar(check, settings, specs[key])
        report.checks.append(check)
    return report


def largest_grammar(settings: Settings, role: str) -> tuple[str, str]:
    """The largest GBNF grammar `role` sends in a run with these settings (every built-in tool granted, any
    criteria, values sized to `PSE_MODEL_MAX_TOKENS`), and what it is, for messages ("" when no message
    fits the limit: the run itself says so)."""
    signatures = tuple(builtin_tools().signatures().values())
    limit = settings.model_max_tokens
    chars = limit * settings.constrain_chars_per_token if limit is not None else None
    shape = TurnShape(role, signatures, None, settings.max_invokes_per_message, chars)
    try:
        grammar = turn_grammar(shape)
    except ValueError:
        return "", f"no grammar for the {role} (no message fits PSE_MODEL_MAX_TOKENS={limit})"
    sized = f"PSE_MODEL_MAX_TOKENS={limit}" if limit is not None else "no token limit"
    return grammar, f"the {role}'s largest grammar ({len(grammar):,} characters, {sized})"


async def _largest_grammar(check: ModelCheck, settings: Settings, spec: ModelSpec) -> None:
    """Send each role's largest grammar; a server that refuses one (or dies on it) is unusable with the
    grammar: a run would end as ERROR at the first turn that sends it."""
    took = []
    for role in check.roles:
        grammar, what = largest_grammar(settings, role)
        if not grammar:
            continue
        probe = await largest_grammar_support(spec, settings.model_timeout_s, grammar, what)
        check.largest_grammar, check.largest_grammar_detail = probe.support, probe.detail
        if probe.support != "yes":
            if probe.support == "no":
                constrain = _variable(check.roles, "CONSTRAIN")
                check.problems.append(f"{probe.detail}; lower PSE_MODEL_MAX_TOKENS, or set {constrain}=off")
                check.usable = False
            return
        took.append(what.removeprefix("the "))
    if took:
        check.largest_grammar_detail = "it took " + "; ".join(took)


async def _wire(settings: Settings, **overrides: object) -> WireFeatures | None:
    try:
        return await pse_sends(with_overrides(settings, "pse doctor", **overrides))
    except PSEError:  # the probe is advisory: a failure here must not hide the model checks
        return None


async def _check(
    settings: Settings, spec: ModelSpec, roles: list[str], pse_constraint: str | None
) -> ModelCheck:
    check = ModelCheck(roles=roles, provider=spec.provider, model=spec.model, url="")
    timeout = settings.model_timeout_s
    facts = await server_facts(spec, timeout)
    check.url, check.reachable, check.latency_ms = facts.url, facts.reachable, facts.latency_ms
    check.served, check.context_tokens = facts.served, facts.context_tokens
    if not facts.reachable:
        check.problems.append(
            f"cannot reach {facts.url}: {facts.error}; start the server (`python -m pse.local` for the "
            f"packaged local models) or set {_variable(roles, 'BASE_URL')}"
        )
        return check
    if facts.error:
        check.problems.append(f"{facts.url}: {facts.error}; set {_variable(roles, 'API_KEY')}")
        return check
    if facts.served is False:
        check.problems.append(
            f"{facts.url} does not serve {spec.model!r} (it serves {', '.join(facts.models)}); set "
            f"{_variable(roles, 'MODEL')} to one of those (a llama.cpp server answers an unknown name "
            "with its default model, silently)"
        )
        return check
    grammar, tools = await grammar_support(spec, timeout), await native_tool_support(spec, timeout)
    check.grammar, check.grammar_detail = grammar.support, grammar.detail
    check.native_tools, check.native_tools_detail = tools.support, tools.detail
    await _exchanges(
        check, settings, spec, pse_constraint if grammar.support != "no" else None, grammar.detail
    )
    _judge(check, spec, grammar, pse_constraint)
    return check


async def _exchanges(
    check: ModelCheck,
    settings: Settings,
    spec: ModelSpec,
    pse_constraint: str | None,
    grammar_detail: str = "",
) -> None:
    """Both exchanges in both modes (constrained only when PSE sends a constraint the server takes);
    tokens per second."""
    done: list[Exchange] = []
    for mode in _MODES:
        value = "off" if mode == "unconstrained" else "grammar"
        if mode == "constrained" and pse_constraint is None:
            why = (
                f"the server takes no grammar ({grammar_detail})"
                if check.grammar == "no"
                else ("this PSE sends no constraint yet (PSE_CONSTRAIN has no effect)")
            )
            skipped = ExchangeResult(detail=f"not run: {why}")
            check.tool_call[mode] = check.verdict[mode] = skipped
            continue
        mode_settings = with_overrides(
            settings,
            "pse doctor",
            constrain=value,
            **_all_roles(constrain=value),
            # The verdict is asked of this model in the Evaluator's role, so its grammar is a verdict's.
            evaluator_provider=spec.provider,
            evaluator_model=spec.model,
            evaluator_base_url=spec.base_url,
            evaluator_api_key=spec.api_key,
        )
        asks = (
            (check.roles[0], "tool_call", tool_call_exchange),
            (Role.EVALUATOR, "verdict", verdict_exchange),
        )
        for role, name, exchange in asks:
            # The tool exchange offers its one tool; the verdict exchange none, so a verdict is all it
            # may write (constrained; unconstrained no tool is offered either way).
            offered = (EXCHANGE_TOOL,) if name == "tool_call" else ()
            client = create_model_client(mode_settings, role, tools=offered)
            try:
                result = await exchange(client)
            finally:
                await client.close()
            done.append(result)
            getattr(check, name)[mode] = ExchangeResult(valid=result.valid, detail=result.detail)
    seconds = sum(e.seconds for e in done)
    if seconds > 0:
        check.tokens_per_s = round(sum(e.completion_tokens for e in done) / seconds, 1)


def _judge(check: ModelCheck, spec: ModelSpec, grammar: Probe, pse_constraint: str | None) -> None:
    """Decide the mode PSE will use, whether the model is usable there, and what to set if not."""
    roles = check.roles
    constrain = _variable(roles, "CONSTRAIN")
    if spec.constrain == "grammar" and grammar.support == "no":
        check.problems.append(
            f"{constrain}=grammar, but the server takes no grammar ({grammar.detail}); set {constrain}=auto "
            "or off, or serve the model with llama.cpp"
        )
    uses = spec.constrain != "off" and pse_constraint is not None and grammar.support == "yes"
    check.mode = "constrained" if uses else "unconstrained"
    owed = [("tool call", check.tool_call)]
    if Role.EVALUATOR in roles:
        owed.append(("verdict", check.verdict))
    failed = [(what, results) for what, results in owed if not results[check.mode].valid]
    other = "constrained" if check.mode == "unconstrained" else "unconstrained"
    for what, results in failed:
        if results[other].valid:
            value = "auto" if other == "constrained" else "off"
            fix = f"set {constrain}={value} (it wrote a valid {what} {other})"
        else:
            fix = f"use a larger instruction-tuned model for {', '.join(roles)}"
            if pse_constraint is not None and grammar.support != "yes":
                fix += f", or a server that takes grammars (this PSE constrains with {pse_constraint})"
        check.problems.append(f"no valid {what} {check.mode} ({results[check.mode].detail}); {fix}")
    if check.context_tokens is not None and spec.context_tokens is None:
        check.advice.append(
            f"the server reports a context window of {check.context_tokens} tokens: set "
            f"{_variable(roles, 'MODEL_CONTEXT_TOKENS')}={check.context_tokens} so PSE checks prompts "
            "before a call"
        )
    elif (
        check.context_tokens is not None
        and spec.context_tokens
        and spec.context_tokens > check.context_tokens
    ):
        check.problems.append(
            f"{_variable(roles, 'MODEL_CONTEXT_TOKENS')}={spec.context_tokens} is more than the server's "
            f"{check.context_tokens}; set it to {check.context_tokens}"
        )
    check.usable = not check.problems
