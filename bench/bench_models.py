"""Model-layer overhead: a scripted call (strict replay of a recorded turn) and request digests; real models.

Figures: per-call microseconds of a scripted `create` with a 20-message, ~40 kB
prompt and a recorded request digest checked in strict mode, and of computing a
request digest alone (what recording adds per call). `real_models`: the local
models on a llama.cpp server, per protocol (see `bench/_real_models.py`; skipped
with a note without the `local` extra).
"""

from __future__ import annotations

import asyncio
import statistics
import time

from autogen_core.models import LLMMessage, SystemMessage, UserMessage

from bench._real_models import run_real_models
from pse.models import Cassette, CassettePlayer, CassetteTurn, ScriptedChatCompletionClient, recorded_request

_CALLS = 300


def _prompt() -> list[LLMMessage]:
    body = "def quicksort(items):\n    return sorted(items)  # placeholder line of code\n" * 25
    messages: list[LLMMessage] = [SystemMessage(content="You are the Specialist. " * 40)]
    messages += [UserMessage(content=f"{i}: {body}", source="ToolAgent") for i in range(19)]
    return messages


def _micros(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50_us": round(statistics.median(ordered) * 1e6, 1),
        "p95_us": round(ordered[int(len(ordered) * 0.95) - 1] * 1e6, 1),
    }


def run() -> dict[str, object]:
    messages = _prompt()
    request = recorded_request(messages)
    turn = CassetteTurn(role="Specialist", content="Done.", request=request)
    cassette = Cassette(turns=[turn] * _CALLS)
    client = ScriptedChatCompletionClient(CassettePlayer(cassette, strict=True), "Specialist")

    async def calls() -> list[float]:
        samples = []
        for _ in range(_CALLS):
            started = time.perf_counter()
            await client.create(messages)
            samples.append(time.perf_counter() - started)
        return samples

    scripted = asyncio.run(calls())
    digests = []
    for _ in range(_CALLS):
        started = time.perf_counter()
        recorded_request(messages)
        digests.append(time.perf_counter() - started)
    prompt_chars = sum(len(str(m.content)) for m in messages)
    return {
        "prompt_chars": prompt_chars,
        "calls": _CALLS,
        "scripted_strict_create": _micros(scripted),
        "request_digest": _micros(digests),
        "real_models": run_real_models(),
    }
