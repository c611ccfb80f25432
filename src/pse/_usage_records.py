"""What a run's model calls cost, as the trace keeps it: tokens, money, waits on a rate limit, and the
probes a server needed (the records of the run's spending, beside `_records`' of its work)."""

from __future__ import annotations

from pydantic import Field

from pse._tool_record import _Record, utc_now

__all__ = ["Cost", "ProbeRecord", "RateLimitRecord", "TokenCount"]


class Cost(_Record):
    """Money, from the configured prices: of one call, or of a whole run (the trace's `cost`)."""

    amount: float = 0.0
    currency: str = "USD"
    unpriced_models: list[str] = Field(default_factory=list, description="models with no price: counted as 0")

    @property
    def priced(self) -> bool:
        """False when some model had no price (its tokens counted as free)."""
        return not self.unpriced_models

    def add(self, other: Cost) -> None:
        """Add another amount (same currency as the run's first priced call; prices name one currency)."""
        if other.amount:
            self.currency = other.currency
        self.amount = round(self.amount + other.amount, 6)
        self.unpriced_models += [m for m in other.unpriced_models if m not in self.unpriced_models]


class TokenCount(_Record):
    """Tokens and calls of one role (or of a whole run)."""

    prompt: int = 0
    completion: int = 0
    calls: int = 0
    estimated: int = Field(
        0, description="tokens of calls the provider reported nothing for (timed out, cancelled): estimated"
    )
    cached: int = Field(
        0, description="prompt tokens the provider served from its prompt cache (part of `prompt`)"
    )
    prefix_counted: int = Field(0, description="prompt tokens sent, by PSE's own counter (pse.tokens)")
    prefix_reusable: int = Field(
        0, description="of those, the ones that repeat a prefix already sent to the same model in the run"
    )

    def add(
        self, prompt: int, completion: int, calls: int = 1, *, estimated: bool = False, cached: int = 0
    ) -> None:
        """Add one call's usage (an estimate, when the provider reported none)."""
        self.prompt += prompt
        self.completion += completion
        self.calls += calls
        self.cached += min(cached, prompt)
        if estimated:
            self.estimated += prompt + completion


class RateLimitRecord(_Record):
    """Time a run's model calls waited before an attempt: on the shared model rate limit
    (PSE_MODEL_RPM, _TPM, _MAX_CONCURRENCY) or on a provider's Retry-After. Waiting, not model latency."""

    waits: int = Field(0, description="model calls that waited")
    waited_s: float = Field(0.0, description="seconds waited, all calls together")
    by_role: dict[str, float] = Field(default_factory=dict, description="seconds waited, per role")
    retry_after_pauses: int = Field(0, description="times a provider's Retry-After paused a call")

    def add(self, role: str, seconds: float, pauses: int = 0) -> None:
        """Add one call's waiting (seconds, rounded to the millisecond) and Retry-After pauses."""
        if seconds > 0:
            self.waits += 1
        self.waited_s = round(self.waited_s + seconds, 3)
        self.by_role[role] = round(self.by_role.get(role, 0.0) + seconds, 3)
        self.retry_after_pauses += pauses


class ProbeRecord(_Record):
    """A call PSE made to a model server that was no turn of a role: the grammar-support probe it sends
    before a role's first call to a server it has not learned yet (`pse.models.ConstraintProbes`)."""

    role: str = Field(description="whose call needed it; its tokens are counted among that role's calls")
    server: str = Field(description="the server's public base URL (no credentials)")
    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    estimated: bool = Field(False, description="the server reported no usage: the prompt is PSE's count")
    reply: str | None = Field(None, description="what the server answered (None: no answer)")
    learned: str = Field("", description="what PSE learned of the server, or why it learned nothing")
    ms: int | None = Field(None, description="milliseconds the probe took")
    at: str = Field(default_factory=utc_now)
