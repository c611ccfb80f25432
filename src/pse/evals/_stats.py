"""The statistics of an evaluation: Wilson intervals for rates, the exact McNemar test for paired arms.

Plain formulas over counts (no SciPy for two functions): the Wilson score interval is what a rate from
20 instances needs (the normal interval goes below 0 or above 1 there), and McNemar's exact test is the
binomial test on the discordant pairs, the test for two arms run on the same instances.
"""

from __future__ import annotations

import math

__all__ = ["mcnemar_exact", "wilson"]

Z95 = 1.959963984540054
"""The 97.5th percentile of the standard normal: a two-sided 95 % interval."""


def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    """The Wilson score interval of `k` successes in `n` trials; None when there are no trials.

    >>> wilson(0, 10)
    (0.0, 0.2775327998628892)
    """
    if n <= 0:
        return None
    if not 0 <= k <= n:
        raise ValueError(f"wilson: k={k} is not between 0 and n={n}")
    p = k / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    # At k=0 and k=n the bound is exactly 0 or 1; the formula leaves rounding noise there.
    low = 0.0 if k == 0 else max(0.0, centre - half)
    high = 1.0 if k == n else min(1.0, centre + half)
    return (low, high)


def mcnemar_exact(only_a: int, only_b: int) -> float:
    """The two-sided exact McNemar p-value of a paired table's discordant cells.

    Under the null hypothesis each discordant pair is a fair coin: p = 2 · P(X ≤ min(b, c)) for
    X ~ Binomial(b + c, 1/2), capped at 1. No discordant pair: p = 1.

    >>> mcnemar_exact(0, 5)
    0.0625
    """
    if only_a < 0 or only_b < 0:
        raise ValueError("mcnemar_exact: counts cannot be negative")
    n = only_a + only_b
    if n == 0:
        return 1.0
    low = min(only_a, only_b)
    tail: float = sum(math.comb(n, i) for i in range(low + 1)) / 2**n
    return min(1.0, 2 * tail)
