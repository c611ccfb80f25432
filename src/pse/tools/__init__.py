"""The tools roles may request, as `ToolSpec`s in a `ToolRegistry`.

The names and parameter names are a public contract (prompts and cassettes use them):
`read_file(path)`, `list_files(path=".")`, `write_file(path, content)`, `bash(command)`,
`run_pytest(target=".")`, `run_ruff(target=".")`, `run_check(name)`. Other parts add tools by
registering a `ToolSpec` (the knowledge base adds `search_knowledge(query, k=5)`). The seven tool
functions are exported as `ToolFunction`s of the same names, which `builtin_tools()` registers.
"""

from pse.protocol import ParamSpec
from pse.tool_names import (
    BUILTIN_CHECKS,
    MCP_NAME,
    MCP_PREFIX,
    MCP_SERVER_NAME,
    MCP_TOOL_NAME,
    MCP_WILDCARD,
    Tool,
    check_tool,
    mcp_tool_name,
    split_mcp_name,
)
from pse.tools._backing import OWN_TESTS, named_outcomes, names_check, passed_names, unbacked
from pse.tools._checks import normalize_target
from pse.tools._commands import bash, run_check
from pse.tools._evidence import (
    PROTECTED_BY_DEFAULT,
    CoverageRule,
    EvidenceFile,
    EvidenceRules,
    Manifest,
    RepositoryFiles,
    build_manifest,
    is_test_file,
    protecting_glob,
)
from pse.tools._files import (
    EVALUATION_PREFIX,
    OWN_TEST_FILE,
    UNCHANGED,
    list_files,
    read_file,
    resolve_path,
    write_file,
)
from pse.tools._own_tests import test_names
from pse.tools._protected import check_config_reason, declared_config
from pse.tools._pyhints import NOT_BOUND, NOT_PYTHON, WITHHELD, parse_python, python_problem, syntax_problem
from pse.tools._pytest import parse_pytest_summary, pytest_plugin_missing, run_pytest
from pse.tools._record import COLLECTION_FAILURE, FAULT_HEADING
from pse.tools._registry import Author, Mode, ToolContext, ToolFunction, ToolOutcome, ToolRegistry, ToolSpec
from pse.tools._ruff import run_ruff

__all__ = [
    "BUILTIN_CHECKS",
    "COLLECTION_FAILURE",
    "EVALUATION_PREFIX",
    "FAULT_HEADING",
    "MCP_NAME",
    "MCP_PREFIX",
    "MCP_SERVER_NAME",
    "MCP_TOOL_NAME",
    "MCP_WILDCARD",
    "NOT_BOUND",
    "NOT_PYTHON",
    "OWN_TESTS",
    "OWN_TEST_FILE",
    "PROTECTED_BY_DEFAULT",
    "UNCHANGED",
    "WITHHELD",
    "Author",
    "CoverageRule",
    "EvidenceFile",
    "EvidenceRules",
    "Manifest",
    "Mode",
    "ParamSpec",
    "RepositoryFiles",
    "Tool",
    "ToolContext",
    "ToolFunction",
    "ToolOutcome",
    "ToolRegistry",
    "ToolSpec",
    "bash",
    "build_manifest",
    "builtin_tools",
    "check_config_reason",
    "check_tool",
    "declared_config",
    "is_test_file",
    "list_files",
    "mcp_tool_name",
    "named_outcomes",
    "names_check",
    "normalize_target",
    "parse_pytest_summary",
    "parse_python",
    "passed_names",
    "protecting_glob",
    "pytest_plugin_missing",
    "python_problem",
    "read_file",
    "resolve_path",
    "run_check",
    "run_pytest",
    "run_ruff",
    "split_mcp_name",
    "syntax_problem",
    "test_names",
    "unbacked",
    "write_file",
]


_PATH_CHARS = 200  # most characters of a path argument under a grammar sized to a token limit
_NAME_CHARS = 80  # most characters of a check name argument under such a grammar


def builtin_tools() -> ToolRegistry:
    """A fresh registry holding the seven built-in tools."""
    path = ParamSpec("path", description="a path relative to the workspace", max_chars=_PATH_CHARS)
    target = ParamSpec(
        "target",
        required=False,
        default=".",
        description="a workspace path (file or folder)",
        max_chars=_PATH_CHARS,
    )
    return ToolRegistry(
        [
            ToolSpec(Tool.READ_FILE, "Read a text file of the workspace.", (path,), read_file),
            ToolSpec(
                Tool.LIST_FILES,
                "List a workspace folder recursively, with file sizes.",
                (
                    ParamSpec(
                        "path",
                        required=False,
                        default=".",
                        description="a folder relative to the workspace",
                        max_chars=_PATH_CHARS,
                    ),
                ),
                list_files,
            ),
            ToolSpec(
                Tool.WRITE_FILE,
                "Create or replace a file of the workspace.",
                (path, ParamSpec("content", description="the whole new file content, raw text")),
                write_file,
                modes=("read-write",),
            ),
            ToolSpec(
                Tool.BASH,
                "Run a bash command in the workspace (no network; read-only unless granted read-write).",
                (ParamSpec("command", description="a bash command line"),),
                bash,
                modes=("read-only", "read-write"),
            ),
            ToolSpec(
                Tool.RUN_PYTEST,
                "Run pytest on the workspace; reports passed, failed and error counts.",
                (target,),
                run_pytest,
                modes=("read-only", "read-write"),
            ),
            ToolSpec(
                Tool.RUN_RUFF,
                "Run ruff check on the workspace; reports the number of findings.",
                (target,),
                run_ruff,
                modes=("read-only", "read-write"),
            ),
            ToolSpec(
                Tool.RUN_CHECK,
                "Run one of the task's declared checks by name (read-only).",
                (ParamSpec("name", description="the check's declared name", max_chars=_NAME_CHARS),),
                run_check,
            ),
        ]
    )
