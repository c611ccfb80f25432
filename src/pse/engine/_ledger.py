"""The ledger: the one owner of a run's tokens and cost, and of the budgets they are held to.

Every model message is charged here once, to its role, in the trace's own records (`trace.tokens`,
`trace.cost`, the cycle's `tokens`), so the figures a user reads and the figures the budgets see are
the same numbers; totals are derived from the per-role counts, never kept by hand.
"""

from __future__ import annotations

from collections.abc import Callable

from pse.config import Settings
from pse.events import Cost, TokenCount
from pse.trace import CycleRecord, Trace

__all__ = ["Ledger", "PriceFn"]

PriceFn = Callable[[str, int, int], Cost]
"""The cost of (role, prompt tokens, completion tokens) on that role's model."""


class Ledger:
    """Charges model usage to a run and says when a budget is used up.

    Args:
        trace: the run's trace; its `tokens` and `cost` are the ledger's books.
        settings: the budgets (`PSE_TOKEN_BUDGET`, `PSE_COST_BUDGET`).
        price: prices a call; None leaves the cost at 0.
    """

    def __init__(self, trace: Trace, settings: Settings, price: PriceFn | None = None) -> None:
        self.trace = trace
        self.settings = settings
        self._price = price

    def charge(self, cycle: CycleRecord, role: str, prompt: int, completion: int) -> None:
        """Book one model call of `role` in this cycle and in the run."""
        self.trace.tokens.by_role.setdefault(role, TokenCount()).add(prompt, completion)
        cycle.tokens.setdefault(role, TokenCount()).add(prompt, completion)
        if self._price is not None:
            self.trace.cost.add(self._price(role, prompt, completion))

    def exhausted(self) -> str | None:
        """Why the run may not spend more (token or cost budget used up), or None."""
        s, used, cost = self.settings, self.trace.tokens.total, self.trace.cost.amount
        if used >= s.token_budget:
            return f"token budget exhausted: {used} of {s.token_budget} (PSE_TOKEN_BUDGET)"
        if s.cost_budget is not None and cost >= s.cost_budget:
            return f"cost budget exhausted: {cost:.4f} of {s.cost_budget} (PSE_COST_BUDGET)"
        return None
