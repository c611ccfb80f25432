"""The protocol: pure parsing and rendering of what roles and the ToolAgent write to each other.

No I/O here; the only PSE modules it uses are the leaf modules `pse.events`, `pse.exceptions` and
`pse.roles`. DSML is the wire format every part of PSE reads; the native protocol (`PSE_PROTOCOL=native`)
is translated into it and back (`_functions`: what a native model is offered; `_native`: the translation).
"""

from pse.protocol._dsml import (
    DsmlError,
    ParamSpec,
    ParsedMessage,
    ToolCall,
    ToolSignature,
    has_tool_calls,
    parse_tool_calls,
    render_tool_calls,
)
from pse.protocol._functions import (
    BLOCK_REASONS,
    OUTPUTS,
    FunctionSpec,
    OutputFunction,
    output_functions,
    tool_function,
)
from pse.protocol._native import (
    NativeCall,
    NativeTurn,
    escape_prose,
    function_results,
    read_native,
    render_native,
)
from pse.protocol._results import ResultItem, parse_tool_results, render_tool_results, truncate_text
from pse.protocol._tags import find_blocked, parse_plan, parse_verdict, render_plan, strip_tool_traffic

__all__ = [
    "BLOCK_REASONS",
    "OUTPUTS",
    "DsmlError",
    "FunctionSpec",
    "NativeCall",
    "NativeTurn",
    "OutputFunction",
    "ParamSpec",
    "ParsedMessage",
    "ResultItem",
    "ToolCall",
    "ToolSignature",
    "escape_prose",
    "find_blocked",
    "function_results",
    "has_tool_calls",
    "output_functions",
    "parse_plan",
    "parse_tool_calls",
    "parse_tool_results",
    "parse_verdict",
    "read_native",
    "render_native",
    "render_plan",
    "render_tool_calls",
    "render_tool_results",
    "strip_tool_traffic",
    "tool_function",
    "truncate_text",
]
