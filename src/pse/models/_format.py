"""The cassette format (a public contract: people write cassettes by hand) and its file I/O.

```json
{"version": 1,
 "turns": [
   {"role": "Planner", "content": "…<plan>…</plan>"},
   {"role": "Evaluator", "content": "…", "usage": {"prompt_tokens": 812, "completion_tokens": 95}},
   {"role": "Specialist", "content": "…",
    "request": {"digest": "<sha256>", "excerpt": "…",
                "messages": [{"speaker": "system", "digest": "…", "chars": 1200, "excerpt": "…"},
                             {"speaker": "user:ToolAgent", "digest": "…", "chars": 310, "excerpt": "…",
                              "text": "<tool_results …>…</tool_results>"}]}}
 ],
 "tool_runs": [
   {"requester": "Specialist", "tool": "write_file", "arguments": {"path": "quicksort.py", "content": "…"},
    "decision": "allowed", "rule": "roles.Specialist.write_file", "status": "ok", "output": "wrote …",
    "facts": {"bytes": 412}}
 ]}
```
`usage` and `request` are optional; recorded cassettes carry both. A turn of the native protocol
(`PSE_PROTOCOL=native`) holds the model's function calls, its `content` the text beside them (if any):
`{"role": "Specialist", "tool_calls": [{"name": "read_file", "arguments": {"path": "a.py"}}]}`.
`usage` and `request` are optional; recorded cassettes carry both. A tool-output message of a request
keeps its whole `text` the first time the cassette holds it (later requests repeat only its digest).
`tool_runs` (optional) are the ToolAgent's executions in run order, as audit records (secrets
scrubbed), which `--replay-tools` answers tool calls from.
`recorded_on` (optional; a recording always has it) says what the cassette fits: the run's task inputs and
the git tree of its repository at the base commit (null: no repository),
`{"inputs": {"REQUEST": "…"}, "repository": "<tree id>"}`. A cassette that has it replays only on those
inputs and that repository; one without it (written by hand) replays on whatever it is given.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from pse.events import ToolCallRecord
from pse.exceptions import CassetteError
from pse.roles import ALL_ROLES

__all__ = [
    "Cassette",
    "CassetteToolCall",
    "CassetteTurn",
    "MessageDigest",
    "RecordedOn",
    "RecordedRequest",
    "TurnUsage",
]


class _Strict(BaseModel):
    # Unknown keys are refused so a typo ("contnet") is an error, not a silently empty turn.
    model_config = ConfigDict(extra="forbid")


class TurnUsage(_Strict):
    """Tokens a turn reports; replayed as the turn's usage instead of the offline count."""

    prompt_tokens: int = Field(ge=0)
    completion_tokens: int = Field(ge=0)


class MessageDigest(_Strict):
    """One message of a recorded request: who sent it, a short digest, its length and an excerpt
    (for tool output, the first time a cassette holds it, also its whole text)."""

    speaker: str
    digest: str
    chars: int = Field(ge=0)
    excerpt: str = ""
    text: str | None = None


class RecordedRequest(_Strict):
    """The request a recorded turn answered: its digest, its last message's excerpt, per-message detail."""

    digest: str = Field(min_length=16)
    excerpt: str = ""
    messages: list[MessageDigest] = Field(default_factory=list)


class CassetteToolCall(_Strict):
    """One native function call of a turn: the function's name and its arguments.

    `arguments` is the JSON object the model sent, or its raw text when that was no JSON object (as a
    model can send it, to replay a malformed call).
    """

    name: str = Field(min_length=1)
    arguments: dict[str, Any] | str = Field(default_factory=dict)

    def arguments_json(self) -> str:
        """The arguments as the JSON text a provider returns."""
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(self.arguments, ensure_ascii=False)


def turn_key(role: str, step: str | None) -> str:
    """The cassette stream of a role's turns: `ROLE`, or `ROLE@STEP` for one step of a steps plan."""
    return role if step is None else f"{role}@{step}"


class CassetteTurn(_Strict):
    """One scripted reply of one role: its text, and in the native protocol its function calls."""

    role: str
    step: str | None = Field(
        None, description='execution = "steps": the step of the plan the turn belongs to (its own stream)'
    )
    content: str = ""
    tool_calls: list[CassetteToolCall] | None = Field(None, min_length=1)
    usage: TurnUsage | None = None
    request: RecordedRequest | None = None

    @property
    def key(self) -> str:
        """The stream the turn is played from: the role, or `ROLE@STEP` for a step's turns."""
        return turn_key(self.role, self.step)

    @model_validator(mode="after")
    def _says_something(self) -> CassetteTurn:
        if "content" not in self.model_fields_set and self.tool_calls is None:
            raise ValueError("a turn needs content, tool_calls or both")
        return self

    @field_validator("role")
    @classmethod
    def _known_role(cls, role: str) -> str:
        if role not in ALL_ROLES:
            raise ValueError(f"role must be one of {', '.join(ALL_ROLES)}, got {role!r}")
        return role


class RecordedOn(_Strict):
    """What a recorded cassette fits: the task inputs and the repository of the run it was recorded on."""

    inputs: dict[str, str] = Field(default_factory=dict)
    repository: str | None = Field(
        None, description="the git tree id of the run's repository at its base commit (None: no repository)"
    )


class Cassette(_Strict):
    """A whole cassette: the version, the turns of every role in the order they were spoken, the tool
    runs of the recorded run in the order they ran, and what it was recorded on (None: written by hand)."""

    version: Literal[1] = 1
    recorded_on: RecordedOn | None = None
    turns: list[CassetteTurn] = Field(default_factory=list)
    tool_runs: list[ToolCallRecord] = Field(default_factory=list)

    def turns_of(self, key: str) -> list[CassetteTurn]:
        """The turns of one stream (a role, or `ROLE@STEP`), in order."""
        return [turn for turn in self.turns if turn.key == key]

    def step_keys(self) -> list[str]:
        """The `ROLE@STEP` streams the cassette holds, in order of appearance (steps runs)."""
        return list(dict.fromkeys(turn.key for turn in self.turns if turn.step is not None))

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> Cassette:
        """Read and validate a cassette file.

        Raises:
            CassetteError: the file is missing, not JSON, or not in the cassette format; the message names
                the file and the turn.
        """
        where = Path(path)
        try:
            raw = where.read_text(encoding="utf-8")
        except OSError as exc:
            raise CassetteError(
                f"cannot read cassette {where}: {exc.strerror or exc}; check the path"
            ) from exc
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise CassetteError(
                f"cassette {where} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
            ) from exc
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise CassetteError(
                f"cassette {where} is not in the cassette format:\n  " + _explain(exc)
            ) from exc

    def to_file(self, path: str | os.PathLike[str]) -> None:
        """Write the cassette atomically (a temp file in the same folder, then a rename)."""
        where = Path(path)
        where.parent.mkdir(parents=True, exist_ok=True)
        text = self.model_dump_json(indent=1, exclude_none=True) + "\n"
        fd, tmp = tempfile.mkstemp(prefix=f".{where.name}.", suffix=".tmp", dir=where.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, where)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


_LISTS = {"turns": "turn", "tool_runs": "tool run"}


def _explain(exc: ValidationError) -> str:
    problems = []
    for err in exc.errors():
        loc = err["loc"]
        if len(loc) >= 2 and loc[0] in _LISTS and isinstance(loc[1], int):
            rest = ".".join(str(p) for p in loc[2:]) or f"the {_LISTS[str(loc[0])]}"
            where = f"{_LISTS[str(loc[0])]} {loc[1]} (counting from 0), {rest}"
        else:
            where = ".".join(str(p) for p in loc) or "the top level"
        problems.append(f"{where}: {err['msg']}")
    return (
        "\n  ".join(problems)
        + '\nA cassette is {"version": 1, "turns": [{"role": "Planner", "content": "..."}]}.'
    )
