"""What a model call costs, from `settings.prices` (per million tokens)."""

from __future__ import annotations

from pse.config import Settings
from pse.events import Cost

__all__ = ["Cost", "price_of"]


def price_of(settings: Settings, model: str, prompt_tokens: int, completion_tokens: int) -> Cost:
    """Cost of one call (or of a sum of calls) of `model`.

    The price is looked up by exact model name, then by the name without a
    `provider/` prefix or an Ollama `:tag`. A model with no price costs 0 and is listed in
    `unpriced_models`, so a trace can say "unpriced" instead of claiming it was free.
    """
    price = settings.prices.get(model)
    if price is None:
        for candidate in (model.rsplit("/", 1)[-1], model.split(":", 1)[0]):
            price = settings.prices.get(candidate)
            if price is not None:
                break
    if price is None:
        return Cost(amount=0.0, unpriced_models=[model])
    amount = (prompt_tokens * price.input + completion_tokens * price.output) / 1_000_000
    return Cost(amount=amount, currency=price.currency)
