"""Whether the fallback sandbox can work here, for tests that run it in a `pse` process of their own.

In-process, a test that needs fallback where it cannot work is skipped by conftest (PSE raises
`FallbackUnusable`); a subprocess only exits 2, so such tests carry `needs_fallback`.
"""

from __future__ import annotations

import pytest

from pse.exceptions import FallbackUnusable
from pse.sandbox import Identity
from pse.sandbox._identity import check_fallback_identity


def _fallback_problem() -> str | None:
    try:
        check_fallback_identity(Identity.for_commands())
    except FallbackUnusable as exc:
        return str(exc)
    return None


FALLBACK_PROBLEM = _fallback_problem()
needs_fallback = pytest.mark.skipif(
    FALLBACK_PROBLEM is not None, reason=f"fallback cannot work here: {FALLBACK_PROBLEM}"
)
