"""Short runs on the local models: the limits the real-model tests and the bench share.

Tiny models on two shared CPU cores write slowly (Gemma-3-270M: about 60 tokens a second on a quiet
machine, a fifth of that on a busy one) and read long prompts slowly, so a run is cut short by
design: few completion tokens per call, one PARTIAL retry and no re-plan, a turn cap and a run
timeout. A run that hits them ends as TIMEOUT, which is an outcome like any other.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

from pse.config import Settings, load_settings

__all__ = ["QWEN_RUN", "SHORT_RUN", "local_run_settings"]

SHORT_RUN: Mapping[str, object] = MappingProxyType(
    {
        "model_max_tokens": 768,  # a short plan, a small file or a verdict fit (the grammar is sized to it)
        "constrain_chars_per_token": 1,  # these models loop on digits, one token each: never cut a turn
        "model_temperature": 0,  # greedy (llama.cpp's prompt cache may still tip a tie)
        "model_timeout_s": 120,
        "model_max_retries": 1,
        "turns_per_cycle": 8,
        "max_partial_retries": 1,
        "max_fail_retries": 0,
        "format_retries": 1,
        "run_timeout_s": 100,
        "tool_output_limit": 1200,  # tool output is prompt: a CSV is ~1.3 characters a token, the window 8k
        "model_context_tokens": 8192,
    }
)
"""Settings of a short run on the local models (every limit named, as keyword overrides)."""

QWEN_RUN: Mapping[str, object] = MappingProxyType(
    {
        # The grammar allows one character a token: Qwen's tokenizer spends a token on every digit, and
        # the 1.5B model at temperature 0 can loop on lists of numbers (`[1, 2, 3, ...]`), which a grammar
        # sized at 3 characters a token let run into the token limit, cut in the middle of its value (the
        # file never written). At 4096 a turn may write a file of ~3,700 characters (~120 lines) and a
        # looping one is closed by the grammar within about five minutes on 2 cores.
        "model_max_tokens": 4096,
        "constrain_chars_per_token": 1,
        "model_temperature": 0,
        "model_timeout_s": 600,
        "model_max_retries": 0,  # the same prompt at temperature 0 loops again: no retry of a timeout
        # Tool turns count: a clean cycle is 7 turns (plan, the writes and their results, the report, the
        # checks and their results, the verdict), 11 with the two one-time nudges of a small model (an
        # early report, a PASS before a check); at 12 the 1.5B model's first passing cycle hit the cap on
        # its last check.
        "turns_per_cycle": 20,
        "max_partial_retries": 2,
        "max_fail_retries": 1,
        # As many failures of one criterion as a plan has cycles (the first and its two revisions): a
        # small model's checks change sides between cycles. On held-out account and merge-intervals
        # (heldout-15) both authors' tests failed on the module in cycle 1, only the Specialist's own in
        # cycle 2, and a cap of 2 ended the run before the revision that would rewrite that test file.
        "max_criterion_failures": 3,
        # Each one-time nudge is a repair: at 1, a Specialist nudged for an early report could not be
        # told that the test file it then wrote does not parse, and the review ran on it (run 9).
        "format_retries": 2,
        "run_timeout_s": 1800,
        "tool_output_limit": 4000,
        "model_context_tokens": 16384,  # the server's n_ctx for the Qwen models
    }
)
"""Settings of a run on the packaged Qwen2.5-Coder models: long enough to do the work (code-delivery,
a HumanEval problem), bounded everywhere (every limit named, as keyword overrides)."""


def local_run_settings(base_url: str, model: str, runs_dir: Path, **overrides: object) -> Settings:
    """Settings of a short run against a local server: every role on `model` unless overridden."""
    options = {"provider": "openai", "base_url": base_url, "model": model, "runs_dir": runs_dir}
    return load_settings(**{**options, **SHORT_RUN, **overrides})
