"""The protocol: pure parsing and rendering of what roles and the ToolAgent write to each other.

No I/O here; the only PSE modules it uses are the leaf modules `pse.events`, `pse.exceptions` and
`pse.roles`. DSML is the wire format every part of PSE reads; the native protocol (`PSE_PROTOCOL=native`)
is translated into it and back (`_functions`: what a native model is offered; `_native`: the translation),
and so are file blocks, the `fenced` write format (`_files`).
`turn_grammar` and `turn_schema` say what a role may send now, for constrained decoding.
"""

from pse.protocol._calls import parse_tool_calls
from pse.protocol._dsml import has_tool_calls, read_invokes
from pse.protocol._dsml_render import render_tool_calls
from pse.protocol._files import FileBlock, calls_as_files, file_block, files_as_calls, find_file_blocks
from pse.protocol._functions import (
    OUTPUTS,
    FunctionSpec,
    OutputFunction,
    output_functions,
    tool_function,
)
from pse.protocol._grammar import MAX_PLAN_ITEMS, PROSE_CHARS, TurnShape, turn_grammar
from pse.protocol._native import (
    NativeCall,
    NativeTurn,
    escape_prose,
    function_results,
    read_native,
    render_native,
)
from pse.protocol._request import (
    FINDINGS_ASKED,
    asks_findings,
    last_plan,
    offers_conflict,
    plan_criteria,
    plan_outputs,
)
from pse.protocol._results import ResultItem, parse_tool_results, render_tool_results, truncate_text
from pse.protocol._schema import protocol_from_json, turn_schema
from pse.protocol._tags import (
    BLOCKED_REASONS,
    SPEC_CONFLICT,
    VERDICT_STATUSES,
    find_blocked,
    find_clarification,
    parse_plan,
    parse_verdict,
    render_plan,
    strip_tool_traffic,
)
from pse.protocol._types import DsmlError, ParamSpec, ParsedMessage, ToolCall, ToolSignature

__all__ = [
    "BLOCKED_REASONS",
    "FINDINGS_ASKED",
    "MAX_PLAN_ITEMS",
    "OUTPUTS",
    "PROSE_CHARS",
    "SPEC_CONFLICT",
    "VERDICT_STATUSES",
    "DsmlError",
    "FileBlock",
    "FunctionSpec",
    "NativeCall",
    "NativeTurn",
    "OutputFunction",
    "ParamSpec",
    "ParsedMessage",
    "ResultItem",
    "ToolCall",
    "ToolSignature",
    "TurnShape",
    "asks_findings",
    "calls_as_files",
    "escape_prose",
    "file_block",
    "files_as_calls",
    "find_blocked",
    "find_clarification",
    "find_file_blocks",
    "function_results",
    "has_tool_calls",
    "last_plan",
    "offers_conflict",
    "output_functions",
    "parse_plan",
    "parse_tool_calls",
    "parse_tool_results",
    "parse_verdict",
    "plan_criteria",
    "plan_outputs",
    "protocol_from_json",
    "read_invokes",
    "read_native",
    "render_native",
    "render_plan",
    "render_tool_calls",
    "render_tool_results",
    "strip_tool_traffic",
    "tool_function",
    "truncate_text",
    "turn_grammar",
    "turn_schema",
]
