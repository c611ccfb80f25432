"""What keeps secrets out of a cassette: the ToolAgent's redaction rule, plus anything shaped like a key.

A cassette is written to be shared (a repository, a bug report), so everything that goes into one — the
replies, the request excerpts, the texts of tool output, the recorded tool runs — passes a `Scrubber`:

* the secret *values* PSE is configured with (API keys, the dashboard token) and those of
  secret-looking environment variables are replaced whole, wherever they occur (also inside a longer
  string), by `[redacted:NAME]`. This is the ToolAgent's `Redactor`, so cassettes and tool output follow
  one rule: a value shorter than `MIN_SECRET_CHARS` is left alone, because it would match ordinary
  text (`PSE_API_KEY=x` would turn every "exposing" into "e***posing"); the recorder warns once of
  each configured key it therefore does not scrub;
* anything shaped like a key (`sk-…`, `Bearer …`, Google and GitHub tokens) becomes `***`.

Recording and replay take digests of scrubbed text alike, so a reply whose secret was scrubbed still
matches its recorded request when it comes back inside the next one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from pse.toolagent import MIN_SECRET_CHARS, Redactor

__all__ = ["KEY_SHAPED", "Scrubber", "scrub_secrets"]

KEY_SHAPED = re.compile(
    r"\b(?:sk|pk|rk)-[A-Za-z0-9_\-]{16,}"  # OpenAI / DeepSeek / Anthropic style keys
    r"|\bBearer\s+[A-Za-z0-9._\-]{16,}"
    r"|\bAIza[0-9A-Za-z_\-]{30,}"  # Google API keys
    r"|\bgh[pousr]_[A-Za-z0-9]{30,}"  # GitHub tokens
)
"""Text shaped like an API key or a bearer token: scrubbed from cassettes whatever its value."""


class Scrubber:
    """Replaces secrets in what a cassette keeps: known values whole (8+ characters), key shapes.

    Args:
        secrets: NAME → value pairs PSE is configured with (`Settings.secrets()`).
        environ: where secret-looking variables are read from (default: this process's environment).
    """

    def __init__(
        self, secrets: Iterable[tuple[str, str]] = (), *, environ: Mapping[str, str] | None = None
    ) -> None:
        self._environ = environ
        self._secrets: dict[str, str] = {}
        self._redactor = Redactor((), environ)
        self.add(secrets)

    def add(self, secrets: Iterable[tuple[str, str]]) -> list[str]:
        """Also scrub these NAME → value pairs; return the names among them too short to be scrubbed."""
        new = {name: value for name, value in secrets if value and self._secrets.get(name) != value}
        if not new:
            return []
        self._secrets.update(new)
        self._redactor = Redactor(self._secrets.items(), self._environ)
        return [name for name, value in new.items() if len(value) < MIN_SECRET_CHARS]

    @property
    def too_short(self) -> list[str]:
        """The configured secrets left as they are: shorter than `MIN_SECRET_CHARS` (names only)."""
        return sorted(name for name, value in self._secrets.items() if len(value) < MIN_SECRET_CHARS)

    def text(self, text: str) -> str:
        """`text` with every secret value and every key-shaped string replaced."""
        return KEY_SHAPED.sub("***", self._redactor.text(text))

    def data(self, value: Any) -> Any:
        """A JSON-like value (tool arguments, facts) with every string scrubbed, keys included."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.data(k): self.data(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.data(v) for v in value]
        return value


def scrub_secrets(text: str, known: Iterable[str] = ()) -> str:
    """`text` scrubbed as a cassette keeps it, with `known` as the configured secret values."""
    return Scrubber(("SECRET", value) for value in known).text(text)
