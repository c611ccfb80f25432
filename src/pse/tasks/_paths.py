"""Where the built-in prompts and tasks live: the repository root in a checkout, `pse/_bundled` in a wheel."""

from __future__ import annotations

from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent.parent  # .../pse
_REPO_ROOT = _PACKAGE_DIR.parent.parent  # .../<checkout> when running from src/pse


def bundled_root() -> Path:
    """The folder holding `prompts/` and `tasks/`.

    A checkout (editable install) wins over `pse/_bundled`, so edits to the repository's prompts and
    tasks take effect without reinstalling; a wheel carries copies under `pse/_bundled` (hatch
    force-include).
    """
    if (_REPO_ROOT / "pyproject.toml").is_file() and (_REPO_ROOT / "prompts" / "protocol.md").is_file():
        return _REPO_ROOT
    return _PACKAGE_DIR / "_bundled"


def prompts_dir() -> Path:
    """The folder of the base role prompts and the shared protocol text."""
    return bundled_root() / "prompts"


def builtin_tasks_dir() -> Path:
    """The tasks folder that ships with PSE (`code-delivery`, `incident-review`)."""
    return bundled_root() / "tasks"
