"""A run's model clients: each role's (metered, prefix-counted, resumed), a step's own, and their price."""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from pathlib import Path

from autogen_core.models import ChatCompletionClient

from pse.events import Cost
from pse.models import (
    ConstraintLog,
    MeteredChatCompletionClient,
    PrefixClient,
    PrefixMeter,
    ResumedTurnsClient,
    TaskGround,
    Turn,
    UsageMeter,
    create_model_client,
    price_of,
)
from pse.runner._frame import RunFrame
from pse.runner._script import RunScript
from pse.tasks import INPUTS_DIR
from pse.toolagent import Policy, tool_functions, tool_signatures
from pse.tools import ToolRegistry

__all__ = ["RunClients"]


class RunClients:
    """Each speaker's model client, built once per run; a steps run's `ROLE@STEP` clients on demand.

    A role's client is the one the caller gave (`given`, metered) or the settings' (its tools and
    functions those `policy` grants it); each counts what a prefix cache could serve, and in a resumed
    cycle answers first with the turns the role gave there.

    Args:
        frame: the run.
        script: the cassette player and recorder the settings' clients use.
        policy: the grants, from which each role's tool signatures and constrained decoding follow.
        registry: every tool of the run.
        given: the caller's own clients, by role (pse.testing's models).

    Attributes:
        clients: role (or `ROLE@STEP`) → client; the run closes each when it ends.
        meter: every call's token usage.
        prefixes: what a prefix cache could serve of each prompt (not of replayed turns).
        constraints: what each call carried (noted in the trace's settings as `constrain_used`).
    """

    def __init__(
        self,
        frame: RunFrame,
        script: RunScript,
        policy: Policy,
        registry: ToolRegistry,
        given: Mapping[str, ChatCompletionClient],
    ) -> None:
        self._frame, self._script, self._policy, self._registry = frame, script, policy, registry
        self._given = given
        self._ground = TaskGround(
            present=_present(frame.workspace), expected=tuple(frame.task.config.expected_outputs)
        )
        self.specs = {role: frame.spec(role) for role in frame.speakers}
        self.meter = UsageMeter()
        # Constrained decoding allows each role exactly its granted tools; what each call carried is noted
        # in the trace's settings (`constrain_used`, filled in as calls are made).
        trace = frame.trace
        self.constraints = ConstraintLog(trace.settings.get("constrain_used") if trace is not None else None)
        self.prefixes = PrefixMeter()
        self.clients: dict[str, ChatCompletionClient] = {role: self._built(role) for role in frame.speakers}
        for role in frame.speakers:
            self.clients[role] = PrefixClient(self.clients[role], role, self.specs[role].model, self.prefixes)
        for role in frame.speakers:
            self.clients[role] = self._resumed(self.clients[role], role, None)

    def for_step(self, role: str, step: str) -> ChatCompletionClient:
        """`role`'s client in `step`: its own cassette stream `ROLE@STEP`, built at the step's first phase."""
        key = f"{role}@{step}"
        if key not in self.clients:
            metered = PrefixClient(self._built(role, step), role, self.specs[role].model, self.prefixes)
            self.clients[key] = self._resumed(metered, role, step)  # a resumed cycle: the step's turns first
        return self.clients[key]

    def price(self, role: str, prompt: int, completion: int, cached: int = 0) -> Cost:
        """What `role`'s call cost on its model."""
        return price_of(self._frame.settings, self.specs[role].model, prompt, completion, cached)

    @property
    def defaulted_scripted(self) -> bool:
        """A speaker is scripted because no model was configured (not because one was asked for)."""
        return any(spec.provider_was_defaulted for spec in self.specs.values())

    def _built(self, role: str, step: str | None = None) -> ChatCompletionClient:
        if role in self._given:  # the same client in every step: its own code keeps its state
            return MeteredChatCompletionClient(self._given[role], role, self.meter)
        policy, registry = self._policy, self._registry
        return create_model_client(
            self._frame.settings,
            role,
            player=self._script.player,
            recorder=self._script.recorder,
            meter=self.meter,
            tools=tool_signatures(role, policy, registry),
            functions=tool_functions(role, policy, registry),
            constraint_log=self.constraints,
            step=step,
            ground=self._ground,
        )

    def _resumed(self, client: ChatCompletionClient, role: str, step: str | None) -> ChatCompletionClient:
        """`client`, answering first with the turns `role` gave in the interrupted cycle (in `step`'s
        stream for a steps plan: the Planner and the final review have none)."""
        resume = self._frame.resume
        if resume is None or resume.again is None:
            return client
        turns = [
            Turn(m.content, m.prompt_tokens, m.completion_tokens, m.thought) for m in resume.turns(role, step)
        ]
        seen = functools.partial(self.prefixes.remember, self.specs[role].model)
        return ResumedTurnsClient(client, turns, seen=seen)


_PRESENT_CAP = 5000
"""Past this many files the workspace is not listed for constrained decoding (`TaskGround.present`)."""


def _present(workspace: Path) -> frozenset[str] | None:
    """The workspace's files as the run starts, but the inputs' and git's (None: over `_PRESENT_CAP`)."""
    found: set[str] = set()
    for folder, dirs, files in os.walk(workspace):
        here = Path(folder).relative_to(workspace)
        if here == Path():
            dirs[:] = [d for d in dirs if d not in (INPUTS_DIR, ".git")]
        found.update((here / name).as_posix() for name in files if not (here == Path() and name == ".git"))
        if len(found) > _PRESENT_CAP:
            return None
    return frozenset(found)
