"""An MCP tool's JSON schema as PSE's protocol sees it: parameters, the conversion of their text, the prompt.

DSML parameter values are text. Each value is converted by the type its schema gives (`convert`):

=========  ===========================================  ==================================
type       text a role writes                           sent as
=========  ===========================================  ==================================
string     anything, as it is                           the text
integer    `5`, `-12`                                   a JSON integer
number     `0.5`, `3`, `1e-3` (finite)                  a JSON number
boolean    `true` / `false` (any case)                  true / false
null       `null`                                       null
array      JSON: `["a", "b"]`                           the list
object     JSON: `{"k": 1}`                             the object
=========  ===========================================  ==================================

A union (`type: [...]`, `anyOf`, `oneOf`) tries each type, string last; an `enum` must then hold the
value. A value that fits none is a precise error for the role, nothing is sent. An optional parameter
left empty is not sent at all (the server applies its own default).

Everything here comes from the server and is untrusted: names that could not be written in a request
are refused, and descriptions are shown to roles as quoted data (`quoted`), capped, with no `<` or `>`
left in them, so no description can open or close a protocol tag.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pse.protocol import ParamSpec

__all__ = [
    "DESCRIPTION_CHARS",
    "MAX_PARAMS",
    "PARAM_DESCRIPTION_CHARS",
    "McpParam",
    "convert",
    "quoted",
    "read_schema",
]

DESCRIPTION_CHARS = 600
"""Most characters of a tool's description a role is shown (the server's text, quoted)."""
PARAM_DESCRIPTION_CHARS = 200
"""Most characters of a parameter's description a role is shown."""
MAX_PARAMS = 32
"""A tool with more parameters is not offered."""
_PARAM_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}")
_TYPES = ("integer", "number", "boolean", "null", "array", "object", "string")
"""Every JSON type, in the order a union tries them (text last: it fits everything)."""
_SHOWN = ("string", "integer", "number", "boolean", "array", "object", "null")
_EXAMPLES = {
    "integer": "an integer (e.g. 5)",
    "number": "a number (e.g. 0.5)",
    "boolean": "true or false",
    "null": "null",
    "array": 'a JSON array (e.g. ["a", "b"])',
    "object": 'a JSON object (e.g. {"key": 1})',
    "string": "text",
}


@dataclass(frozen=True, slots=True)
class McpParam:
    """One parameter of an MCP tool: the JSON types it takes (empty: any), and what a role is told."""

    name: str
    types: tuple[str, ...]
    required: bool
    default: str | None
    description: str
    enum: tuple[Any, ...] | None = None

    def spec(self) -> ParamSpec:
        """The parameter as the DSML parser checks it (its value is text until `convert`)."""
        return ParamSpec(self.name, self.required, self.default, self.summary())

    def summary(self) -> str:
        """`integer, default 10, "how many"`: its type, default and (quoted) description."""
        shown = sorted(self.types, key=_SHOWN.index)
        parts = [" or ".join(shown) or "any JSON value"]
        if self.enum is not None:
            parts.append("one of " + ", ".join(json.dumps(v) for v in self.enum))
        if self.required:
            parts.append("required")
        elif self.default:
            parts.append(f"default {json.dumps(self.default) if 'string' in self.types else self.default}")
        else:
            parts.append("optional")
        if self.description:
            parts.append(quoted(self.description, PARAM_DESCRIPTION_CHARS))
        return ", ".join(parts)


def quoted(text: str, limit: int) -> str:
    """`text` as one JSON string of at most `limit` characters of it, with `<`, `>` and `&` escaped:
    shown to a role, it is visibly the server's words and can never form a protocol tag."""
    cut = text if len(text) <= limit else text[:limit] + "…"
    return json.dumps(cut).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _resolve(prop: Any, schema: Mapping[str, Any]) -> Mapping[str, Any]:
    """A property's schema, following one local `$ref` (`#/$defs/Name`)."""
    if not isinstance(prop, Mapping):
        return {}
    ref = prop.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        found = (schema.get("$defs") or {}).get(ref.removeprefix("#/$defs/"))
        return found if isinstance(found, Mapping) else {}
    return prop


def _types_of(prop: Mapping[str, Any], schema: Mapping[str, Any]) -> tuple[str, ...]:
    kind = prop.get("type")
    found: list[str] = []
    if isinstance(kind, str):
        found.append(kind)
    elif isinstance(kind, list):
        found += [k for k in kind if isinstance(k, str)]
    for key in ("anyOf", "oneOf"):
        for option in prop.get(key) or []:
            found += _types_of(_resolve(option, schema), schema)
    if not found and "enum" in prop:
        found += sorted({_json_type(v) for v in prop["enum"]}, key=_TYPES.index)
    if not found and isinstance(prop.get("properties"), Mapping):
        found.append("object")
    return tuple(sorted({t for t in found if t in _TYPES}, key=_TYPES.index))


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, list):
        return "array"
    return "object" if isinstance(value, dict) else "string"


def _default_text(value: Any) -> str | None:
    if value is None:
        return None  # left empty, so not sent: the server's default applies
    return value if isinstance(value, str) else json.dumps(value)


def read_schema(schema: Any) -> tuple[list[McpParam], str | None]:
    """The parameters of a tool's `inputSchema`, or why the tool cannot be offered."""
    if not isinstance(schema, Mapping):
        return [], "its input schema is not a JSON object"
    properties = schema.get("properties") or {}
    if not isinstance(properties, Mapping):
        return [], "its input schema's properties are not an object"
    if len(properties) > MAX_PARAMS:
        return [], f"it has {len(properties)} parameters, more than {MAX_PARAMS}"
    required = set(schema.get("required") or [])
    params: list[McpParam] = []
    for name, raw in properties.items():
        if not isinstance(name, str) or not _PARAM_NAME.fullmatch(name):
            return [], f"parameter name {str(name)[:40]!r} cannot be written in a request"
        prop = _resolve(raw, schema)
        enum = prop.get("enum")
        description = prop.get("description") or (raw.get("description") if isinstance(raw, Mapping) else "")
        params.append(
            McpParam(
                name=name,
                types=_types_of(prop, schema),
                required=name in required,
                default=None if name in required else _default_text(prop.get("default")),
                description=description if isinstance(description, str) else "",
                enum=tuple(enum) if isinstance(enum, list) else None,
            )
        )
    return params, None


def _as(kind: str, text: str) -> tuple[bool, Any]:
    """(fits, value) of `text` read as JSON type `kind`."""
    stripped = text.strip()
    if kind == "string":
        return True, text
    if kind == "integer":
        return (True, int(stripped)) if re.fullmatch(r"[+-]?\d{1,30}", stripped) else (False, None)
    if kind == "boolean":
        lowered = stripped.lower()
        return (lowered in ("true", "false")), lowered == "true"
    if kind == "null":
        return stripped == "null", None
    try:
        value = json.loads(stripped)
    except ValueError:
        return False, None
    if kind == "number":
        fits = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        return fits, value
    return isinstance(value, list if kind == "array" else dict), value


def convert(tool: str, params: list[McpParam], arguments: Mapping[str, str]) -> dict[str, Any]:
    """The JSON arguments of a call, from its text values.

    Raises:
        ValueError: a value fits none of its parameter's types (or not its enum); says which and how.
    """
    payload: dict[str, Any] = {}
    for param in params:
        text = arguments.get(param.name)
        if text is None or (text == "" and not param.required):
            continue
        kinds = param.types or ("string",)
        for kind in kinds:
            fits, value = _as(kind, text)
            if fits and (param.enum is None or value in param.enum):
                payload[param.name] = value
                break
        else:
            wanted = " or ".join(_EXAMPLES[k] for k in kinds)
            if param.enum is not None:
                wanted = "one of " + ", ".join(json.dumps(v) for v in param.enum)
            raise ValueError(f"{tool}: parameter {param.name!r} must be {wanted}, got {text[:80]!r}")
    return payload
