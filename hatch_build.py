"""Hatch build hook: ship the built-in `prompts/` and `tasks/` inside the wheel as `pse/_bundled/...`, and
the dashboard's built front-end as `pse/web/static/...`.

`pse.tasks` finds the bundled folders there when PSE is installed rather than run from a checkout. Local
artefacts (a knowledge index built inside a task folder, caches) are left out; hatch's own `exclude`
does not apply to force-included folders, hence this hook.

The front-end is built by Vite from `web/` into `src/pse/web/static` (`make setup`: `npm ci` and `npm
run build`). That folder is git-ignored (a build output, never committed), so hatch would leave it out:
it is force-included here. A wheel without it would serve no dashboard, so building one without it
fails and says how to build it; an editable install reads the folder from the checkout instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

_BUNDLED = ("prompts", "tasks")
_SKIP = {".index", "__pycache__", ".pytest_cache", ".ruff_cache", ".mypy_cache"}
_STATIC = Path("src/pse/web/static")


class BundleHook(BuildHookInterface):  # type: ignore[type-arg]
    """Adds every bundled file and every built front-end file, one by one, to the force-include map."""

    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        root = Path(self.root)
        for folder in _BUNDLED:
            for path in sorted((root / folder).rglob("*")):
                relative = path.relative_to(root)
                if path.is_file() and not _SKIP.intersection(relative.parts):
                    build_data["force_include"][str(path)] = f"pse/_bundled/{relative.as_posix()}"
        if self.target_name != "wheel" or version == "editable":
            return
        static = root / _STATIC
        if not (static / "index.html").is_file():
            raise RuntimeError(
                f"{_STATIC}/index.html is missing: the dashboard's front-end is not built. Run `make setup` "
                "(or `cd web && npm ci && npm run build`; Node.js 18+) before building the wheel."
            )
        for path in sorted(static.rglob("*")):
            if path.is_file():
                relative = path.relative_to(static).as_posix()
                build_data["force_include"][str(path)] = f"pse/web/static/{relative}"
