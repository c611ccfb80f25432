"""The ledger: the one owner of a run's tokens and cost, and of the budgets they are held to.

Every model call is charged here once, as its client reports it (`pse.models.UsageMeter`): an answered
call with the usage the provider reported (or PSE's estimate, marked, when it reported none), and a call
that timed out or was cancelled while the provider worked on it with its estimated prompt — so what a
user reads, what the budgets see and what the server served agree. The books are the trace's own
records (`trace.tokens`, `trace.cost`, the current cycle's `tokens`); run totals are derived from the
per-role counts. Replies the run never saw as a message (they arrived after a stop) are handed back as
late messages, so the trace holds every message a model produced; a call PSE made of its own (a
server's grammar-support probe) is counted as a call of the role that needed it and kept in
`trace.probes`. The time a call waited on the shared model rate limit or on a provider's Retry-After is
booked apart, in `trace.rate_limit`: waiting, not model latency.
"""

from __future__ import annotations

from collections.abc import Callable

from pse.engine._limits import LoopLimits
from pse.events import Cost, MessageRecord, RateLimitRecord, TokenCount
from pse.models import CallUsage
from pse.trace import CycleRecord, Trace

__all__ = ["Ledger", "PriceFn"]

PriceFn = Callable[[str, int, int, int], Cost]
"""The cost of (role, prompt tokens, completion tokens, cached prompt tokens) on that role's model."""


class Ledger:
    """Charges model usage to a run and says when a budget is used up.

    Args:
        trace: the run's trace; its `tokens` and `cost` are the ledger's books.
        limits: the budgets (`token_budget`, `cost_budget`).
        price: prices a call; None leaves the cost at 0.
    """

    def __init__(self, trace: Trace, limits: LoopLimits, price: PriceFn | None = None) -> None:
        self.trace = trace
        self.limits = limits
        self._price = price
        self.cycle: CycleRecord | None = None
        """The cycle being run: calls are charged to it too."""
        self._replies: list[tuple[str, str]] = []
        self._facts: list[tuple[str, str, str | None, int | None]] = []
        """(role, text, finish reason, model ms) of each reply no message of the trace has claimed."""

    def record_call(self, usage: CallUsage) -> None:
        """Book one model call (the meter's sink), and what it waited (`trace.rate_limit`)."""
        if round(usage.waited_s, 3) > 0 or usage.retry_after_pauses:
            if self.trace.rate_limit is None:
                self.trace.rate_limit = RateLimitRecord()
            self.trace.rate_limit.add(usage.role, usage.waited_s, usage.retry_after_pauses)
        if usage.probe is not None:  # PSE's own call, no turn of the role: its reply is no message
            self.trace.probes.append(usage.probe)
        if not usage.calls:  # a report of waiting only (or a probe that never reached its server)
            return
        prompt, completion, cached = usage.prompt, usage.completion, usage.cached
        self.trace.tokens.by_role.setdefault(usage.role, TokenCount()).add(
            prompt, completion, usage.calls, estimated=usage.estimated, cached=cached
        )
        if self.cycle is not None:
            self.cycle.tokens.setdefault(usage.role, TokenCount()).add(
                prompt, completion, usage.calls, estimated=usage.estimated, cached=cached
            )
        if self._price is not None:
            self.trace.cost.add(self._price(usage.role, prompt, completion, cached))
        if usage.probe is not None:
            return
        if usage.text is not None:
            self._replies.append((usage.role, usage.text))
            self._facts.append((usage.role, usage.text, usage.finish_reason, usage.model_ms))

    def claim_reply(self, role: str, text: str) -> tuple[str | None, int | None]:
        """The finish reason and model time of `role`'s first unclaimed reply with this text, or
        (None, None): a message that no model call of this process produced (a replayed or resumed turn,
        a ToolAgent message), or whose text the client changed."""
        for i, (who, said, finish, ms) in enumerate(self._facts):
            if who == role and said == text:
                del self._facts[i]
                return finish, ms
        return None, None

    def record_prefix(self, role: str, counted: int, reusable: int) -> None:
        """Book how much of one prompt repeats a prefix sent before (the prefix meter's sink)."""
        books = [self.trace.tokens.by_role.setdefault(role, TokenCount())]
        if self.cycle is not None:
            books.append(self.cycle.tokens.setdefault(role, TokenCount()))
        for count in books:
            count.prefix_counted += counted
            count.prefix_reusable += reusable

    def begin(self, cycle: CycleRecord) -> None:
        """A cycle starts: its calls are charged to it."""
        self.cycle = cycle
        self._replies = []
        self._facts = []

    def late_messages(self, cycle: CycleRecord) -> list[MessageRecord]:
        """Replies of this cycle that never became a message of it (they came after the stop)."""
        seen: dict[str, int] = {}
        for message in cycle.messages:
            seen[message.source] = seen.get(message.source, 0) + 1
        late: list[MessageRecord] = []
        for role, text in self._replies:
            if seen.get(role, 0) > 0:
                seen[role] -= 1
            else:
                late.append(MessageRecord(source=role, content=text, late=True))
        return late

    def exhausted(self) -> str | None:
        """Why the run may not spend more (token or cost budget used up), or None."""
        s, used, cost = self.limits, self.trace.tokens.total, self.trace.cost.amount
        if used >= s.token_budget:
            return f"token budget exhausted: {used} of {s.token_budget} (PSE_TOKEN_BUDGET)"
        if s.cost_budget is not None and cost >= s.cost_budget:
            return f"cost budget exhausted: {cost:.4f} of {s.cost_budget} (PSE_COST_BUDGET)"
        return None

    def admits(self, prompt: int) -> str | None:
        """Why a call with a prompt of `prompt` tokens may not start (the budget cannot cover it), or None."""
        s, used = self.limits, self.trace.tokens.total
        if used + prompt > s.token_budget:
            return (
                f"token budget cannot cover the next prompt: {used} used + about {prompt} > {s.token_budget} "
                "(PSE_TOKEN_BUDGET)"
            )
        return self.exhausted()
