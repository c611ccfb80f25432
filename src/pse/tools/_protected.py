"""Check-configuration files: what a role may not write, because it would change how a check runs or reports.

The list follows the check tools' own discovery rules:

* pytest reads its configuration from the first of `pytest.toml`, `.pytest.toml`, `pytest.ini`,
  `.pytest.ini`, `pyproject.toml`, `tox.ini`, `setup.cfg` found from its arguments upward (pytest 9
  docs, "Configuration: ini-files"), so any of them at any depth may become the configuration; it
  imports every `conftest.py` in the collected directories and their parents (hooks there can rewrite
  results); and it imports test modules with their directories on `sys.path`.
* ruff reads the closest `pyproject.toml` (with a `[tool.ruff]` table), `ruff.toml` or `.ruff.toml` of
  each file, at any depth ("Configuring Ruff: config file discovery").
* the interpreter imports `sitecustomize`/`usercustomize` and processes `*.pth` files from its path at
  start-up, and a module on the path can shadow the standard library or the check tools themselves
  (`pytest.py`, `_pytest/`, `ruff.py`, `json.py`, ...).

Checks also run isolated (`python -I`, pytest's append import mode, ruff `--isolated`), so these files
would rarely take effect; refusing to write them is the second lock, and it makes an attempt visible.
A task that needs one (fixtures in a `conftest.py`, a ruff configuration) declares it in
`[verification] check_config_files` of its `task.toml`; then it may be written, and every check run
reports that a role wrote it.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import PurePosixPath

__all__ = [
    "CHECK_TOOL_MODULES",
    "PYTEST_CONFIG_FILES",
    "RUFF_CONFIG_FILES",
    "check_config_reason",
    "declared_config",
]

PYTEST_CONFIG_FILES = (
    "pytest.toml",
    ".pytest.toml",
    "pytest.ini",
    ".pytest.ini",
    "pyproject.toml",
    "tox.ini",
    "setup.cfg",
)
RUFF_CONFIG_FILES = ("pyproject.toml", "ruff.toml", ".ruff.toml")
_STARTUP_FILES = ("sitecustomize.py", "usercustomize.py")
CHECK_TOOL_MODULES = frozenset(
    {"pytest", "_pytest", "py", "pluggy", "iniconfig", "packaging", "pygments", "ruff", "pse"}
)
"""Modules the check tools and PSE's pytest plugin import: a workspace module of that name shadows them."""
_SHADOWED = frozenset(sys.stdlib_module_names) | CHECK_TOOL_MODULES


def _module_name(path: PurePosixPath) -> str | None:
    """The top-level module a path would define if its folder were on sys.path (`x.py`, `x/__init__.py`)."""
    if path.suffix in (".py", ".pyc", ".pyi", ".so") and path.name != "__init__.py":
        return path.name.split(".", 1)[0]
    if path.name == "__init__.py" and len(path.parts) >= 2:
        return path.parts[-2]
    return None


def check_config_reason(path: str) -> str | None:
    """Why a workspace path changes how a check runs or reports; None for an ordinary file."""
    pure = PurePosixPath(path.strip())
    name = pure.name
    if name == "conftest.py":
        return "pytest imports every conftest.py it finds; its hooks can rewrite test results"
    if name in PYTEST_CONFIG_FILES or name in RUFF_CONFIG_FILES:
        tools = [
            t for t, names in (("pytest", PYTEST_CONFIG_FILES), ("ruff", RUFF_CONFIG_FILES)) if name in names
        ]
        return (
            f"{' and '.join(tools)} may read {name} as configuration (options, ignored rules, test selection)"
        )
    if name in _STARTUP_FILES or pure.suffix == ".pth":
        return f"Python runs {name} at start-up when it is on the path"
    module = _module_name(pure)
    if module is not None and module in _SHADOWED:
        what = "a check tool" if module in CHECK_TOOL_MODULES else "the standard library"
        return f"a module named {module!r} would shadow {what} for the code the checks import"
    return None


def declared_config(paths: Iterable[str]) -> frozenset[str]:
    """The task's declared check-configuration files, normalized like workspace paths."""
    return frozenset(str(PurePosixPath(p.strip())) for p in paths if p.strip())
