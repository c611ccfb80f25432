"""The dashboard's cold build prints no warning (issue 47, item 8): Vite said `theme-init.js` "can't be bundled
without type=module" on every `make setup`. The classic script is a public file, named as one (`/theme-init.js`,
served under the build's base), so Vite copies it and warns of nothing."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

WEB = Path(__file__).resolve().parents[1] / "web"


@pytest.mark.skipif(
    shutil.which("npx") is None or not (WEB / "node_modules" / ".bin" / "vite").exists(),
    reason="the front-end's npm packages are not installed (make setup installs them)",
)
def test_the_build_warns_of_nothing_and_keeps_the_theme_script_first(tmp_path: Path) -> None:
    out = tmp_path / "static"
    done = subprocess.run(
        ["npx", "--no-install", "vite", "build", "--outDir", str(out), "--emptyOutDir", "--logLevel", "warn"],
        cwd=WEB, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (done.stdout + done.stderr).strip() == ""  # warn level: nothing to say
    html = (out / "index.html").read_text()
    assert html.index('<script src="/static/theme-init.js"></script>') < html.index('type="module"')
    assert (out / "theme-init.js").read_text() == (WEB / "public" / "theme-init.js").read_text()
