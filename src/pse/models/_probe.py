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

The probe costs one prompt of two words and one completion token per server (base URL), once: what it
learned is kept for the process and, for `CACHE_TTL_S`, in `$XDG_CACHE_HOME/pse/servers.json` (else
`~/.cache/pse/servers.json`), so later runs on the same server send no probe (`ConstraintProbes`). A
probe is a call like any other: its usage and its reply are reported (`ProbeCall`), and a run counts them
in its trace. A reasoning model behind a server that constrains only the answer after its reasoning (vLLM
with a reasoning parser) spends that one token reasoning and looks unsupported.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import httpx

from pse.exceptions import ModelUnavailableError
from pse.models._resilient import public_url

__all__ = [
    "CACHE_TTL_S",
    "PROBE_PROMPT",
    "SERVER_PROBES",
    "ConstraintProbes",
    "ConstraintSupport",
    "Dialect",
    "ProbeCall",
    "probe_server",
]

Dialect = Literal["llama.cpp", "vllm-guided", "vllm", "sglang", "ollama"]
"""A server family, by the fields it reads a grammar and a JSON schema from."""
ConstraintKind = Literal["grammar", "json"]
PROBE_PROMPT = "Say OK."
CACHE_TTL_S = 24 * 3600.0
"""How long what a probe learned of a server is kept on disk: a server restarted with other options is
learned again the next day (or at once, after removing the cache file)."""

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


@dataclass(frozen=True)
class ProbeCall:
    """One probe as it went: what it cost and what it learned (what a run records of it).

    Attributes:
        support: what was learned (None: the probe got no answer; it was cut or the server unreachable).
        sent: the request reached the server (False: no connection was made; no call to count).
        prompt / completion: tokens, as the server reported them, or PSE's count of the prompt (`estimated`).
        estimated: the server reported no usage (or never answered).
        reply: the server's answer text (None: no answer).
        ms: how long it took.
        note: why it learned nothing, when it did not.
    """

    server: str
    model: str
    support: ConstraintSupport | None
    sent: bool
    prompt: int
    completion: int
    estimated: bool
    reply: str | None
    ms: int
    note: str = ""


ProbeSink = Callable[[ProbeCall], None]
"""Told of every probe sent, answered or not."""


async def probe_server(
    base_url: str,
    model: str,
    *,
    api_key: str | None = None,
    timeout_s: float = 30.0,
    on_probe: ProbeSink | None = None,
) -> ConstraintSupport:
    """Ask an OpenAI-compatible server, with one tiny completion, which grammar field it applies.

    Args:
        on_probe: told of the probe once it is over (answered, refused, unreachable or cancelled).

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
    started = time.perf_counter()

    def told(
        support: ConstraintSupport | None,
        response: httpx.Response | None,
        note: str = "",
        *,
        sent: bool = True,
    ) -> None:
        if on_probe is None:
            return
        prompt, completion, reply = _usage(response)
        estimated = prompt is None and sent
        on_probe(
            ProbeCall(
                server=server,
                model=model,
                support=support,
                sent=sent,
                prompt=(_PROBE_PROMPT_TOKENS if sent else 0) if prompt is None else prompt,
                completion=completion or 0,
                estimated=estimated,
                reply=reply,
                ms=round((time.perf_counter() - started) * 1000),
                note=note,
            )
        )

    try:
        async with httpx.AsyncClient(timeout=timeout_s) as http:
            response = await http.post(f"{base_url.rstrip('/')}/chat/completions", json=body, headers=headers)
    except httpx.HTTPError as exc:  # a connection never made sent nothing: no call to count
        told(None, None, f"no answer: {type(exc).__name__}", sent=not isinstance(exc, httpx.ConnectError))
        raise ModelUnavailableError(
            f"the constrained-decoding probe could not reach {server}: {type(exc).__name__}: {exc}"
        ) from exc
    except asyncio.CancelledError:  # the run stopped while the server worked on it: the prompt was sent
        told(None, None, "cut: the run stopped before the server answered")
        raise
    support = _support_of(server, response)
    told(support, response)
    return support


_PROBE_PROMPT_TOKENS = 10
"""PSE's count of the probe's prompt (its message in a chat template) when the server reports none."""


def _support_of(server: str, response: httpx.Response) -> ConstraintSupport:
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


def _usage(response: httpx.Response | None) -> tuple[int | None, int | None, str | None]:
    """The prompt and completion tokens a probe's answer reports (None: none), and its text."""
    if response is None:
        return None, None, None
    if response.status_code != 200:
        return None, None, " ".join(response.text.split())[:200]
    try:
        usage = response.json().get("usage") or {}
        prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    except (ValueError, AttributeError):
        prompt = completion = None
    ok = isinstance(prompt, int) and isinstance(completion, int)
    return (prompt, completion, _content(response)) if ok else (None, None, _content(response))


def _content(response: httpx.Response) -> str:
    try:
        content = response.json()["choices"][0]["message"]["content"]
    except (ValueError, LookupError, TypeError):
        return ""
    return content if isinstance(content, str) else ""


def default_cache() -> Path:
    """Where what probes learned is kept across runs: `$XDG_CACHE_HOME/pse/servers.json`."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pse" / "servers.json"


class ConstraintProbes:
    """What each server accepts, probed at most once per base URL: kept for the life of this object and,
    with a `cache` file, across processes for `CACHE_TTL_S` (`SERVER_PROBES` keeps it in `default_cache()`).

    `SERVER_PROBES` is the process's one instance: every role's client asks it, so a run whose three
    roles share a server probes it once, and later runs (in this process or another) not at all.

    Args:
        cache: where the file is (called at each use), or None: this process only.
    """

    def __init__(self, cache: Callable[[], Path | None] | None = None) -> None:
        self._known: dict[str, ConstraintSupport] = {}
        self.cache = cache
        self.probes = 0
        """Probe calls made (for tests and `pse doctor`)."""

    async def support(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout_s: float = 30.0,
        on_probe: ProbeSink | None = None,
    ) -> ConstraintSupport:
        """The server's support: remembered, read from the cache file, or probed (`on_probe` is told).

        Raises:
            ModelUnavailableError: the probe could not reach the server (nothing is cached then).
        """
        key = public_url(base_url, "openai")
        if key not in self._known:
            cached = self._read().get(key)
            if cached is not None:
                self._known[key] = cached
            else:
                self.probes += 1
                found = await probe_server(
                    base_url, model, api_key=api_key, timeout_s=timeout_s, on_probe=on_probe
                )
                self._known[key] = found
                self._write(key, found)
        return self._known[key]

    def forget(self, base_url: str) -> None:
        """Learn this server again at its next question (a server restarted with other options)."""
        key = public_url(base_url, "openai")
        self._known.pop(key, None)
        self._write(key, None)

    def clear(self) -> None:
        """Forget every server this process learned (tests); the cache file stays."""
        self._known.clear()

    def _path(self) -> Path | None:
        return self.cache() if self.cache is not None else None

    def _entries(self) -> dict[str, Any]:
        path = self._path()
        if path is None:
            return {}
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def _read(self) -> dict[str, ConstraintSupport]:
        now, known = time.time(), {}
        for server, entry in self._entries().items():
            try:
                fresh = now - float(entry["at"]) < CACHE_TTL_S
                dialect = entry["dialect"]
                if fresh and (dialect is None or dialect in _GRAMMAR_FIELDS or dialect == "ollama"):
                    known[server] = ConstraintSupport(server, dialect, f"{entry['detail']} (learned before)")
            except (KeyError, TypeError, ValueError):
                continue
        return known

    def _write(self, key: str, support: ConstraintSupport | None) -> None:
        """Keep (or with None, drop) one server's entry; a cache that cannot be written is no error."""
        path = self._path()
        if path is None:
            return
        entries = self._entries()
        if support is None:
            entries.pop(key, None)
        else:
            entries[key] = {"dialect": support.dialect, "detail": support.detail, "at": time.time()}
        with contextlib.suppress(OSError):
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".servers.", dir=path.parent)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as handle:
                    json.dump(entries, handle, indent=1)
                os.replace(tmp, path)
            finally:
                Path(tmp).unlink(missing_ok=True)


SERVER_PROBES = ConstraintProbes(cache=default_cache)
