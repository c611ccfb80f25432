"""The tools roles may request, as `ToolSpec`s in a `ToolRegistry`.

The names and parameter names are a public contract (prompts and cassettes use them):
`read_file(path)`, `list_files(path=".")`, `write_file(path, content)`, `bash(command)`,
`run_pytest(target=".")`, `run_ruff(target=".")`, `run_check(name)`. Other parts add tools by
registering a `ToolSpec` (the knowledge base adds `search_knowledge(query, k=5)`).
"""

from pse.protocol import ParamSpec
from pse.tools import _checks, _commands, _files  # the tool functions: reached through builtin_tools()
from pse.tools._checks import normalize_target, parse_pytest_summary
from pse.tools._files import EVALUATION_PREFIX, resolve_path
from pse.tools._names import BUILTIN_CHECKS, Tool, check_tool
from pse.tools._protected import check_config_reason, declared_config
from pse.tools._registry import Author, Mode, ToolContext, ToolFunction, ToolOutcome, ToolRegistry, ToolSpec

__all__ = [
    "BUILTIN_CHECKS",
    "EVALUATION_PREFIX",
    "Author",
    "Mode",
    "ParamSpec",
    "Tool",
    "ToolContext",
    "ToolFunction",
    "ToolOutcome",
    "ToolRegistry",
    "ToolSpec",
    "builtin_tools",
    "check_config_reason",
    "check_tool",
    "declared_config",
    "normalize_target",
    "parse_pytest_summary",
    "resolve_path",
]


def builtin_tools() -> ToolRegistry:
    """A fresh registry holding the seven built-in tools."""
    path = ParamSpec("path", description="a path relative to the workspace")
    target = ParamSpec("target", required=False, default=".", description="a workspace path (file or folder)")
    return ToolRegistry(
        [
            ToolSpec(Tool.READ_FILE, "Read a text file of the workspace.", (path,), _files.read_file),
            ToolSpec(
                Tool.LIST_FILES,
                "List a workspace folder recursively, with file sizes.",
                (
                    ParamSpec(
                        "path", required=False, default=".", description="a folder relative to the workspace"
                    ),
                ),
                _files.list_files,
            ),
            ToolSpec(
                Tool.WRITE_FILE,
                "Create or replace a file of the workspace.",
                (path, ParamSpec("content", description="the whole new file content, raw text")),
                _files.write_file,
                modes=("read-write",),
            ),
            ToolSpec(
                Tool.BASH,
                "Run a bash command in the workspace (no network; read-only unless granted read-write).",
                (ParamSpec("command", description="a bash command line"),),
                _commands.bash,
                modes=("read-only", "read-write"),
            ),
            ToolSpec(
                Tool.RUN_PYTEST,
                "Run pytest on the workspace; reports passed, failed and error counts.",
                (target,),
                _checks.run_pytest,
                modes=("read-only", "read-write"),
            ),
            ToolSpec(
                Tool.RUN_RUFF,
                "Run ruff check on the workspace; reports the number of findings.",
                (target,),
                _checks.run_ruff,
                modes=("read-only", "read-write"),
            ),
            ToolSpec(
                Tool.RUN_CHECK,
                "Run one of the task's declared checks by name (read-only).",
                (ParamSpec("name", description="the check's declared name"),),
                _commands.run_check,
            ),
        ]
    )
