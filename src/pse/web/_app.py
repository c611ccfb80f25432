"""The dashboard application: the API, the static UI, the guards, and `serve` (uvicorn)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from importlib.resources import files
from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse, HTMLResponse, Response
from fastapi.staticfiles import StaticFiles

from pse.config import Settings, load_settings
from pse.history import RunHistory
from pse.repo import repository_folder
from pse.web._api import router
from pse.web._catalog import TraceCatalog
from pse.web._evals import router as evals_router
from pse.web._live import router as live_router
from pse.web._runs import RunManager, runs_root
from pse.web._security import GuardMiddleware, check_bind

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "STATIC_DIR", "create_app", "serve"]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8080
STATIC_DIR = Path(str(files("pse.web") / "static"))
"""The UI as Vite builds it from `web/` (`make setup`; never committed), shipped inside the wheel."""
NOT_BUILT = (
    "<!doctype html><html lang=en><meta charset=utf-8><title>PSE dashboard: front-end not built</title>"
    "<h1>The dashboard's front-end is not built</h1><p>This checkout has no <code>src/pse/web/static/"
    "index.html</code>. Run <code>make setup</code> (it runs <code>npm ci</code> and <code>npm run build"
    "</code> in <code>web/</code>; Node.js 18 or later is needed), then reload. The API under "
    "<code>/api</code> works without it.</p></html>"
)


def create_app(settings: Settings | None = None, *, repositories: Sequence[Path] = ()) -> FastAPI:
    """Build the dashboard app for `settings` (default: read from the environment).

    `repositories` are the git repositories the Start form may work on (`pse serve --repo PATH`): a
    run is started on no other.

    The token is `settings.web_token` (`PSE_WEB_TOKEN`); when set, every `/api` call needs it as a
    bearer token. Runs started through the app execute as asyncio tasks of the serving loop; leaving
    the app's lifespan cancels them and waits for their outcome to be recorded.
    """
    settings = settings or load_settings()
    token = settings.web_token.get_secret_value() if settings.web_token is not None else None
    allowed = tuple(dict.fromkeys(str(repository_folder(repo)) for repo in repositories))
    manager = RunManager(settings)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await manager.shutdown()

    app = FastAPI(
        title="PSE dashboard",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        openapi_url="/api/openapi.json" if token is None else None,
    )
    root = runs_root(settings)
    evals = settings.evals_dir.resolve()  # not created: a GET never writes, and none there means none yet
    app.state.settings = settings.model_copy(update={"runs_dir": root, "evals_dir": evals})
    app.state.web_token = token or None
    app.state.manager = manager
    app.state.runs_root = root
    app.state.repositories = allowed
    app.state.evals_root = evals
    app.state.history = RunHistory(root, app.state.settings)
    app.state.catalog = TraceCatalog(root)
    app.include_router(router)
    app.include_router(live_router)
    app.include_router(evals_router)
    app.mount("/static", StaticFiles(directory=STATIC_DIR, check_dir=False), name="static")

    @app.get("/", include_in_schema=False)
    def index() -> Response:
        page = STATIC_DIR / "index.html"
        if not page.is_file():
            return HTMLResponse(NOT_BUILT, status_code=503, headers={"Cache-Control": "no-store"})
        return FileResponse(page, headers={"Cache-Control": "no-store"})

    app.add_middleware(GuardMiddleware, token=token or None)
    return app


def serve(
    settings: Settings | None = None,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    *,
    repositories: Sequence[Path] = (),
) -> None:
    """Serve the dashboard with uvicorn until interrupted.

    Raises:
        UserError: `host` is not loopback and `PSE_WEB_TOKEN` is unset or too short (nothing is bound), or
            a repository is no git repository's folder.
    """
    import uvicorn

    settings = settings or load_settings()
    token = settings.web_token.get_secret_value() if settings.web_token is not None else None
    check_bind(host, token)
    app = create_app(settings, repositories=repositories)
    uvicorn.run(app, host=host, port=port, log_level="info", access_log=False)
