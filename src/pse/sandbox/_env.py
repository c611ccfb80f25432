"""The environment a command sees: an allow-list of the parent's, with every secret-looking name dropped."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path

__all__ = ["SECRET_NAME", "scrubbed_environment"]

SECRET_NAME = re.compile(
    r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE", re.IGNORECASE
)
"""A variable whose name matches holds a secret: never passed to a command, and its value is redacted."""
_PROVIDER_PREFIXES = (
    "PSE_",
    "OPENAI_",
    "OLLAMA_",
    "DEEPSEEK_",
    "ANTHROPIC_",
    "AZURE_",
    "AWS_",
    "GOOGLE_",
    "HF_",
)
_KEEP = ("PATH", "LANG", "LANGUAGE", "TZ")
_FALLBACK_PATH = "/usr/local/bin:/usr/bin:/bin"


def scrubbed_environment(home: str, *, parent: Mapping[str, str] | None = None) -> dict[str, str]:
    """What a command sees: PATH, LANG, LC_*, TZ of the parent (never a secret-looking one), HOME and
    TMPDIR at `home`, the project's interpreter first on PATH, and no PYTHON* variable but two that
    make Python quieter (no bytecode files, unbuffered output)."""
    source = dict(os.environ) if parent is None else dict(parent)
    env: dict[str, str] = {}
    for name, value in source.items():
        allowed = name in _KEEP or name.startswith("LC_")
        if allowed and not SECRET_NAME.search(name) and not name.startswith(_PROVIDER_PREFIXES):
            env[name] = value
    interpreter_bin = str(Path(sys.executable).parent)
    env["PATH"] = interpreter_bin + os.pathsep + env.get("PATH", _FALLBACK_PATH)
    env.setdefault("LANG", "C.UTF-8")
    env.update(HOME=home, TMPDIR=home, PYTHONDONTWRITEBYTECODE="1", PYTHONUNBUFFERED="1", TERM="dumb")
    return env
