"""What keeps the dashboard safe to leave running: the bind guard, bearer auth, request guards, safe paths.

Threat model, plainly: with no token the server trusts every process on this machine that can reach
127.0.0.1 (as any local web app does) and defends only against web pages in the user's browser
(DNS rebinding via the Host check, cross-site POSTs via the Origin and JSON content-type checks).
With `PSE_WEB_TOKEN` set, every API call must carry it. There is no TLS here: expose the server
beyond loopback only behind a TLS-terminating proxy, or the token crosses the network in clear text.
"""

from __future__ import annotations

import hmac
import ipaddress
from pathlib import Path, PurePosixPath
from urllib.parse import urlsplit

from fastapi import HTTPException, Request
from starlette.types import ASGIApp, Receive, Scope, Send

from pse.exceptions import UserError

__all__ = [
    "MIN_TOKEN_LENGTH",
    "GuardMiddleware",
    "check_bind",
    "is_loopback_host",
    "require_token",
    "safe_workspace_file",
]

MIN_TOKEN_LENGTH = 16
"""Shortest `PSE_WEB_TOKEN` accepted for a non-loopback bind (a guessable token is no guard)."""

_LOOPBACK_NAMES = frozenset({"localhost", "localhost.", "ip6-localhost"})


def is_loopback_host(host: str) -> bool:
    """True for `localhost` and any loopback IPv4/IPv6 literal (brackets allowed)."""
    host = host.strip().lower().removeprefix("[").removesuffix("]")
    if host in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str | None) -> None:
    """Refuse to serve beyond loopback without a token.

    Raises:
        UserError: `host` is not a loopback address and no (long enough) token is set.
    """
    if is_loopback_host(host):
        return
    if not token:
        raise UserError(
            f"refusing to bind {host}: it is reachable from other machines and PSE_WEB_TOKEN is not set; "
            "set PSE_WEB_TOKEN to a long random secret (e.g. `python -c 'import secrets; "
            "print(secrets.token_urlsafe(32))'`) or bind 127.0.0.1"
        )
    if len(token) < MIN_TOKEN_LENGTH:
        raise UserError(
            f"refusing to bind {host}: PSE_WEB_TOKEN has {len(token)} characters, fewer than "
            f"{MIN_TOKEN_LENGTH}; use a long random secret"
        )


def require_token(request: Request) -> None:
    """FastAPI dependency: when the app has a token, the request must carry `Authorization: Bearer <it>`.

    The comparison is constant-time (`hmac.compare_digest`) so the token cannot be guessed byte by byte.
    """
    token: str | None = request.app.state.web_token
    if token is None:
        return
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), token.encode()):
        raise HTTPException(
            status_code=401,
            detail="missing or wrong bearer token: send `Authorization: Bearer <PSE_WEB_TOKEN>`",
            headers={"WWW-Authenticate": "Bearer"},
        )


class GuardMiddleware:
    """Host, Origin and content-type checks in front of every request, plus security headers.

    - Without a token, the Host header must name a loopback host: a DNS-rebinding page whose name
      resolves to 127.0.0.1 sends its own name as Host and is refused.
    - A request carrying an Origin must come from the same host and port it is sent to: another site's
      page cannot drive the API through the user's browser.
    - A POST with a body must be JSON: HTML forms cannot send `application/json` cross-site.
    """

    def __init__(self, app: ASGIApp, *, token_set: bool) -> None:
        self.app = app
        self.token_set = token_set

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        problem = self._problem(scope, headers)
        if problem is not None:
            status, detail = problem
            await _send_json(send, status, detail)
            return

        async def send_with_headers(message: dict[str, object]) -> None:
            if message["type"] == "http.response.start":
                present = {bytes(k).lower() for k, _ in message.get("headers", [])}  # type: ignore[attr-defined]
                extra = [
                    (k.encode(), v.encode())
                    for k, v in _SECURITY_HEADERS.items()
                    if k.encode() not in present
                ]
                message["headers"] = [*message.get("headers", []), *extra]  # type: ignore[misc]
            await send(message)

        await self.app(scope, receive, send_with_headers)  # type: ignore[arg-type]

    def _problem(self, scope: Scope, headers: dict[str, str]) -> tuple[int, str] | None:
        host = headers.get("host", "")
        hostname = urlsplit(f"//{host}").hostname or ""
        if not self.token_set and not is_loopback_host(hostname):
            return 403, f"host {host!r} refused: without PSE_WEB_TOKEN only loopback host names are served"
        origin = headers.get("origin")
        if origin is not None and origin != "null" and urlsplit(origin).netloc.lower() != host.lower():
            return 403, f"cross-origin request from {origin!r} refused"
        if scope["method"] == "POST" and int(headers.get("content-length", "0") or 0) > 0:
            ctype = headers.get("content-type", "").split(";")[0].strip().lower()
            if ctype != "application/json":
                return 415, "POST bodies must be application/json"
        return None


_SECURITY_HEADERS = {
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    "content-security-policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
    ),
}


async def _send_json(send: Send, status: int, detail: str) -> None:
    import json

    body = json.dumps({"detail": detail}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


def safe_workspace_file(workspace: Path, relative: str) -> Path:
    """The real path of `relative` inside `workspace`; HTTPException 400 if malformed, 404 if absent/outside.

    Refuses absolute paths, `..`, backslashes and NUL before touching the disk, then resolves symlinks
    and requires the real path to stay inside the workspace's real path: a symlink pointing out of the
    workspace is answered as if the file did not exist.
    """
    if not relative or "\x00" in relative or "\\" in relative or relative.startswith("/"):
        raise HTTPException(400, f"file path {relative!r} must be relative to the run workspace")
    parts = PurePosixPath(relative).parts
    if ".." in parts or any(p.startswith("/") for p in parts):
        raise HTTPException(400, f"file path {relative!r} may not contain '..'")
    root = workspace.resolve()
    try:
        target = (root / relative).resolve(strict=True)
    except (OSError, RuntimeError):
        raise HTTPException(404, f"no file {relative!r} in the run workspace") from None
    if not target.is_relative_to(root) or not target.is_file():
        raise HTTPException(404, f"no file {relative!r} in the run workspace")
    return target
