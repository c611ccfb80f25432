"""The PSE web dashboard: a FastAPI app with live runs over SSE, run history, trace explorer and metrics.

Start it with `pse serve` (127.0.0.1:8080 by default) or build the app with `create_app(settings)`.
"""

from pse.web._app import DEFAULT_HOST, DEFAULT_PORT, create_app, serve
from pse.web._runs import MAX_ACTIVE_RUNS, LiveRun, RunManager
from pse.web._security import check_bind, is_loopback_host

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "MAX_ACTIVE_RUNS",
    "LiveRun",
    "RunManager",
    "check_bind",
    "create_app",
    "is_loopback_host",
    "serve",
]
