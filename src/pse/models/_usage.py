"""What a model call costs, from `settings.prices` (per million tokens)."""

from __future__ import annotations

from typing import NamedTuple

from pse.config import Settings

__all__ = ["Cost", "price_of"]


class Cost(NamedTuple):
    """The price of some tokens. `priced` is False when the model has no entry in `PSE_PRICES` (amount 0)."""

    amount: float
    currency: str
    priced: bool


def price_of(settings: Settings, model: str, prompt_tokens: int, completion_tokens: int) -> Cost:
    """Cost of one call (or of a sum of calls) of `model`.

    The price is looked up by exact model name, then by the name without a
    `provider/` prefix or an Ollama `:tag`. A model with no price costs 0 with
    `priced=False`, so a trace can say "unpriced" instead of claiming it was free.
    """
    price = settings.prices.get(model)
    if price is None:
        for candidate in (model.rsplit("/", 1)[-1], model.split(":", 1)[0]):
            price = settings.prices.get(candidate)
            if price is not None:
                break
    if price is None:
        return Cost(0.0, "USD", False)
    amount = (prompt_tokens * price.input + completion_tokens * price.output) / 1_000_000
    return Cost(amount, price.currency, True)
