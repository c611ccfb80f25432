"""Which constrained decoding a model server accepts: found once per server and process, by one tiny call.

OpenAI-compatible servers take a grammar in fields of their own, sent in the request body
(`extra_body` of the openai SDK). The probe is one chat completion of at most one token that carries a
one-character grammar in each field a server family reads, each forcing another digit:

=============================  ==========================================  =====
field                          read by                                     reply
=============================  ==========================================  =====
`grammar`                      llama.cpp's server, llama-cpp-python        `1`
`guided_grammar`               vLLM before 0.12                            `2`
`structured_outputs.grammar`   vLLM (the only form from 0.12)              `3`
`ebnf`                         SGLang                                      `4`
=============================  ==========================================  =====

A server applies the field it knows and ignores the others (a vLLM that knows both of its fields
applies one), so the reply names the field to use. The prompt ("Say OK.") never makes a model
answer a lone digit, so a server that ignores every field is seen for what it is; one that refuses
unknown fields (OpenAI's own API) answers with an error status: both mean no grammar. The JSON-schema
form for each family follows from its grammar field (`ConstraintSupport.request_args`). Ollama is known
without a probe: it takes a JSON schema in `format` and no grammar.

The probe costs one prompt of two words and one completion token per server (base URL) and process
(`ConstraintProbes`). A reasoning model behind a server that constrains only the answer after its
reasoning (vLLM with a reasoning parser) spends that one token reasoning and looks unsupported.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import httpx

from pse.exceptions import ModelUnavailableError
from pse.models._resilient import public_url

__all__ = [
    "PROBE_PROMPT",
    "SERVER_PROBES",
    "ConstraintProbes",
    "ConstraintSupport",
    "Dialect",
    "probe_server",
]

Dialect = Literal["llama.cpp", "vllm-guided", "vllm", "sglang", "ollama"]
"""A server family, by the fields it reads a grammar and a JSON schema from."""
ConstraintKind = Literal["grammar", "json"]
PROBE_PROMPT = "Say OK."

_Body = dict[str, Any]
_GRAMMAR_FIELDS: dict[Dialect, Callable[[str], _Body]] = {
    "llama.cpp": lambda g: {"grammar": g},
    "vllm-guided": lambda g: {"guided_grammar": g},
    "vllm": lambda g: {"structured_outputs": {"grammar": g}},
    "sglang": lambda g: {"ebnf": g},
}
# llama-cpp-python answers HTTP 500 to response_format json_schema, while both llama.cpp servers read
# {"type": "json_object", "schema": ...}.
_JSON_FIELDS: dict[Dialect, Callable[[_Body], _Body]] = {
    "llama.cpp": lambda s: {"response_format": {"type": "json_object", "schema": s}},
    "vllm-guided": lambda s: {"guided_json": s},
    "vllm": lambda s: {"structured_outputs": {"json": s}},
    "sglang": lambda s: {
        "response_format": {"type": "json_schema", "json_schema": {"name": "turn", "schema": s}}
    },
}
_PROBE_REPLIES: dict[str, Dialect] = {"1": "llama.cpp", "2": "vllm-guided", "3": "vllm", "4": "sglang"}


def _probe_fields() -> _Body:
    body: _Body = {}
    for reply, dialect in _PROBE_REPLIES.items():
        body.update(_GRAMMAR_FIELDS[dialect](f'root ::= "{reply}"'))
    return body


@dataclass(frozen=True)
class ConstraintSupport:
    """What one server accepts for constrained decoding, and how that was found out.

    Attributes:
        server: the server's public base URL (no credentials).
        dialect: its family, by the fields it reads; None when it takes no constraint PSE can send.
        detail: how this was decided, for messages (e.g. "the probe's `grammar` field was applied").
    """

    server: str
    dialect: Dialect | None
    detail: str

    @property
    def grammar(self) -> bool:
        """It constrains decoding to a GBNF grammar."""
        return self.dialect in _GRAMMAR_FIELDS

    @property
    def json(self) -> bool:
        """It constrains decoding to a JSON schema."""
        return self.dialect in _JSON_FIELDS or self.dialect == "ollama"

    def request_args(self, kind: ConstraintKind, constraint: str | Mapping[str, Any]) -> dict[str, Any]:
        """The `extra_create_args` of an AutoGen call that carry `constraint` (GBNF text or JSON schema).

        Raises:
            ValueError: this server does not take that kind.
        """
        if kind == "grammar" and isinstance(constraint, str) and self.dialect in _GRAMMAR_FIELDS:
            return {"extra_body": _GRAMMAR_FIELDS[self.dialect](constraint)}
        if kind == "json" and isinstance(constraint, Mapping):
            if self.dialect == "ollama":
                return {"format": dict(constraint)}  # AutoGen's Ollama client passes it on as `format`
            if self.dialect in _JSON_FIELDS:
                return {"extra_body": _JSON_FIELDS[self.dialect](dict(constraint))}
        raise ValueError(f"{self.server} ({self.dialect or 'no known dialect'}) takes no {kind} constraint")


async def probe_server(
    base_url: str, model: str, *, api_key: str | None = None, timeout_s: float = 30.0
) -> ConstraintSupport:
    """Ask an OpenAI-compatible server, with one tiny completion, which grammar field it applies.

    Raises:
        ModelUnavailableError: the server could not be reached (connection refused, timeout).
    """
    server = public_url(base_url, "openai")
    body = {
        "model": model,
        "messages": [{"role": "user", "content": PROBE_PROMPT}],
        "max_tokens": 1,
        "temperature": 0,
        "stream": False,
        **_probe_fields(),
    }
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        async with httpx.AsyncClient(timeout=timeout_s) as http:
            response = await http.post(f"{base_url.rstrip('/')}/chat/completions", json=body, headers=headers)
    except httpx.HTTPError as exc:
        raise ModelUnavailableError(
            f"the constrained-decoding probe could not reach {server}: {type(exc).__name__}: {exc}"
        ) from exc
    if response.status_code != 200:
        text = " ".join(response.text.split())[:200]
        return ConstraintSupport(
            server, None, f"it answered the probe with HTTP {response.status_code}: {text}"
        )
    reply = _content(response)
    dialect = _PROBE_REPLIES.get(reply.strip())
    if dialect is None:
        return ConstraintSupport(
            server, None, f"it applied none of the probe's grammar fields (replied {reply!r})"
        )
    field = next(iter(_GRAMMAR_FIELDS[dialect]("")))
    return ConstraintSupport(server, dialect, f"it applied the probe's `{field}` field ({dialect})")


def _content(response: httpx.Response) -> str:
    try:
        content = response.json()["choices"][0]["message"]["content"]
    except (ValueError, LookupError, TypeError):
        return ""
    return content if isinstance(content, str) else ""


class ConstraintProbes:
    """What each server accepts, probed at most once per base URL for the life of this object.

    `SERVER_PROBES` is the process's one instance: every role's client asks it, so a run whose three
    roles share a server probes it once, and so do later runs in the same process.
    """

    def __init__(self) -> None:
        self._known: dict[str, ConstraintSupport] = {}
        self.probes = 0
        """Probe calls made (for tests and `pse doctor`)."""

    async def support(
        self, base_url: str, model: str, *, api_key: str | None = None, timeout_s: float = 30.0
    ) -> ConstraintSupport:
        """The server's support, probing it when this is its first question.

        Raises:
            ModelUnavailableError: the probe could not reach the server (nothing is cached then).
        """
        key = base_url.rstrip("/")
        if key not in self._known:
            self.probes += 1
            self._known[key] = await probe_server(base_url, model, api_key=api_key, timeout_s=timeout_s)
        return self._known[key]

    def clear(self) -> None:
        """Forget every server (tests; a server restarted with other options)."""
        self._known.clear()


SERVER_PROBES = ConstraintProbes()
