"""Hatch build hook: ship the built-in `prompts/` and `tasks/` inside the wheel as `pse/_bundled/...`.

`pse.tasks` finds them there when PSE is installed rather than run from a checkout. Local artefacts
(a knowledge index built inside a task folder, caches) are left out; hatch's own `exclude` does not
apply to force-included folders, hence this hook.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

_BUNDLED = ("prompts", "tasks")
_SKIP = {".index", "__pycache__", ".pytest_cache", ".ruff_cache", ".mypy_cache"}


class BundleHook(BuildHookInterface):  # type: ignore[type-arg]
    """Adds every bundled file, one by one, to the wheel's force-include map."""

    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        root = Path(self.root)
        for folder in _BUNDLED:
            for path in sorted((root / folder).rglob("*")):
                relative = path.relative_to(root)
                if path.is_file() and not _SKIP.intersection(relative.parts):
                    build_data["force_include"][str(path)] = f"pse/_bundled/{relative.as_posix()}"
