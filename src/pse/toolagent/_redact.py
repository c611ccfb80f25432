"""Secrets never leave a tool: each secret *value* is replaced before a role, the trace or a cassette sees it.

Tool commands get a scrubbed environment and (under bwrap, or as root) cannot read the PSE process's
own, but a secret can still reach a tool's output another way: a `.env` file in the workspace, a log
line, a value the fallback sandbox let a command read from `/proc`. So the executor replaces every
secret value in every tool output and fact with `[redacted:NAME]`. Secret values are those of the
environment variables whose names look secret (`*KEY*`, `*TOKEN*`, `*SECRET*`, `*PASSWORD*`,
`*CREDENTIAL*`, ...) plus the keys PSE is configured with. Values shorter than `MIN_SECRET_CHARS` are
left alone: they would match ordinary text, and no real secret is that short.

What this does not do: catch a secret that a command re-encodes (base64, reversed, split in two).
The sandboxes keep the environment out of reach; redaction is the second lock, by value.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from pse.config import Settings
from pse.sandbox import SECRET_NAME

__all__ = ["MIN_SECRET_CHARS", "Redactor", "settings_secrets"]

MIN_SECRET_CHARS = 8
"""Shortest value treated as a secret."""


class Redactor:
    """Replaces known secret values in text with `[redacted:NAME]`.

    Args:
        secrets: NAME → value pairs to redact (beyond the environment's).
        environ: the environment to take secret-looking variables from (default: this process's).
    """

    def __init__(
        self, secrets: Iterable[tuple[str, str]] = (), environ: Mapping[str, str] | None = None
    ) -> None:
        env = os.environ if environ is None else environ
        found = {value: name for name, value in env.items() if SECRET_NAME.search(name)}
        found.update({value: name for name, value in secrets})
        # Longest first: a secret that contains another is replaced whole.
        self._pairs = sorted(
            ((value, name) for value, name in found.items() if len(value) >= MIN_SECRET_CHARS),
            key=lambda pair: -len(pair[0]),
        )

    @property
    def names(self) -> list[str]:
        """The names of the secrets it redacts (never the values)."""
        return sorted({name for _, name in self._pairs})

    def text(self, text: str) -> str:
        """`text` with every secret value replaced."""
        for value, name in self._pairs:
            if value in text:
                text = text.replace(value, f"[redacted:{name}]")
        return text

    def data(self, value: Any) -> Any:
        """A JSON-like value (facts) with every string redacted, recursively."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.text(str(k)) if isinstance(k, str) else k: self.data(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.data(v) for v in value]
        return value


def settings_secrets(settings: Settings) -> list[tuple[str, str]]:
    """The secret values PSE is configured with (API keys, the dashboard token), by variable name.

    They may come from a `.env` file rather than the environment, so they are listed explicitly.
    """
    return settings.secrets()  # the per-role keys too: they sit in nested role models
