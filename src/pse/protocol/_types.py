"""The typed requests of the protocol: a tool's signature, a parsed call, a precise error, a message."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["DsmlError", "ParamSpec", "ParsedMessage", "ToolCall", "ToolSignature"]


@dataclass(frozen=True, slots=True)
class ParamSpec:
    """One parameter of a tool, as the parser checks it.

    `max_chars` marks a short value (a path, a name, a count): a grammar sized to a token limit gives
    it exactly that many characters, of any but `<`, and the rest of the message to the long values.
    """

    name: str
    required: bool = True
    default: str | None = None
    description: str = ""
    max_chars: int | None = None


@dataclass(frozen=True, slots=True)
class ToolSignature:
    """What the parser needs to know about a tool: its name and parameters."""

    name: str
    params: tuple[ParamSpec, ...] = ()

    def usage(self) -> str:
        """`name(a, b=".")`, for error messages and prompts."""
        parts = [p.name if p.required else f"{p.name}={p.default!r}" for p in self.params]
        return f"{self.name}({', '.join(parts)})"


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A well-formed request. `arguments` has every parameter, defaults filled in; `normalised` names each
    parameter whose raw value was taken as the model meant it (a fence unwrapped, the XML nesting's
    indentation removed) and says what was changed."""

    index: int
    name: str
    arguments: dict[str, str]
    normalised: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class DsmlError:
    """A request that cannot run. `kind` names the rule (e.g. `unknown_tool`), `message` says what to do."""

    index: int
    kind: str
    message: str
    name: str = ""
    arguments: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ParsedMessage:
    """Everything one message asked for, in order. `found_block` is False when it held no `<tool_calls>`."""

    items: tuple[ToolCall | DsmlError, ...]
    found_block: bool
