"""What keeps the dashboard safe to leave running: the bind guard, bearer auth, request guards, safe reads.

Threat model, plainly: with no token the server trusts every process on this machine that can reach
127.0.0.1 (as any local web app does) and defends only against web pages in the user's browser
(DNS rebinding via the Host check; cross-site and `Origin: null` requests via the Origin check; forms
and other "simple" cross-site requests by requiring `Content-Type: application/json` or the
`X-PSE-Request` header on everything that changes state). With `PSE_WEB_TOKEN` set, every API call
must carry it, and it is checked before any request body is read. Every request body is capped at
`MAX_REQUEST_BODY_BYTES` before it is read. There is no TLS here: expose the server beyond loopback only
behind a TLS-terminating proxy, or the token crosses the network in clear text.

Run folders and their workspaces are written by model-driven tools, so nothing in them is trusted:
every file the dashboard reads from one (the trace, the workspace listing, workspace files) goes
through `read_run_file`, `open_workspace_file` or `workspace_listing`, which never follow a symlink
anywhere below the runs directory, never open a FIFO or device, and cap what they read
(`pse._run_files` does the walking; this module turns its refusals into HTTP answers). Only the runs
directory itself is trusted.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import os
from pathlib import Path, PurePosixPath
from typing import BinaryIO
from urllib.parse import urlsplit

from fastapi import HTTPException, Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pse._run_files import (
    MAX_TRACE_BYTES,
    RunFileTooLarge,
    open_beneath,
    read_beneath,
    regular_files_beneath,
)
from pse.exceptions import UserError

__all__ = [
    "CSRF_HEADER",
    "MAX_LISTING_DEPTH",
    "MAX_REQUEST_BODY_BYTES",
    "MAX_SERVED_FILE_BYTES",
    "MAX_TRACE_BYTES",
    "MIN_TOKEN_LENGTH",
    "GuardMiddleware",
    "bearer_matches",
    "check_bind",
    "is_loopback_host",
    "open_workspace_file",
    "read_run_file",
    "require_token",
    "workspace_listing",
]

MIN_TOKEN_LENGTH = 16
"""Shortest `PSE_WEB_TOKEN` accepted for a non-loopback bind (a guessable token is no guard)."""
MAX_REQUEST_BODY_BYTES = 64 * 1024
"""Largest request body any route accepts (413 beyond); the biggest real one, a run start, is < 1 KiB."""
MAX_SERVED_FILE_BYTES = 32 * 1024 * 1024
"""Largest workspace file served (403 beyond); it is streamed, never held in memory whole."""
MAX_LISTING_DEPTH = 32
"""Deepest folder level of a workspace that the file listing enters."""
CSRF_HEADER = "X-PSE-Request"
"""Custom header (`X-PSE-Request: 1`) that marks a state-changing request without a JSON body as ours:
a cross-site page cannot send it without a CORS preflight, which this server never grants."""

_STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
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


_UNAUTHORIZED = "missing or wrong bearer token: send `Authorization: Bearer <PSE_WEB_TOKEN>`"


def bearer_matches(authorization: str, token: str) -> bool:
    """True when an `Authorization` header value is `Bearer <token>`, compared in constant time.

    `hmac.compare_digest` keeps the token from being guessed byte by byte from response times.
    """
    scheme, _, given = authorization.partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode())


def require_token(request: Request) -> None:
    """FastAPI dependency: when the app has a token, the request must carry `Authorization: Bearer <it>`.

    `GuardMiddleware` already answers 401 before the app runs; this keeps the router guarded wherever
    it is mounted.
    """
    token: str | None = request.app.state.web_token
    if token is not None and not bearer_matches(request.headers.get("authorization", ""), token):
        raise HTTPException(status_code=401, detail=_UNAUTHORIZED, headers={"WWW-Authenticate": "Bearer"})


class _BodyTooLarge(HTTPException):
    """Raised from `receive` once a streamed body passes the cap; FastAPI answers it as a 413."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"request body over {limit} bytes")


class GuardMiddleware:
    """Everything decided from the request line and headers, before the app (or any body) is touched.

    In order:
    - Without a token, the Host header must name a loopback host: a DNS-rebinding page whose name
      resolves to 127.0.0.1 sends its own name as Host and is refused (403).
    - A request carrying an Origin must come from the same host and port it is sent to (403); a
      state-changing one (POST, PUT, PATCH, DELETE) may not carry `Origin: null`, which sandboxed
      iframes and `data:` pages send (403).
    - With a token, an `/api` request without the right bearer token is answered 401 here, so its
      body is never read.
    - A state-changing request must have `Content-Type: application/json` or the `X-PSE-Request`
      header, body or not: an HTML form or a `no-cors` fetch can send neither cross-site (415 when it
      declares another content type, 403 when it declares none).
    - A `Content-Length` over `max_body_bytes` is answered 413 at once; a body without one (chunked)
      is counted as the app pulls it and cut off with 413 past the cap.

    Every response gets the security headers.
    """

    def __init__(
        self, app: ASGIApp, *, token: str | None, max_body_bytes: int = MAX_REQUEST_BODY_BYTES
    ) -> None:
        self.app = app
        self.token = token
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        problem = self._problem(scope, headers)
        if problem is not None:
            status, detail = problem
            extra = {"www-authenticate": "Bearer"} if status == 401 else {}
            await _send_json(send, status, detail, extra)
            return

        started = False
        pulled = 0
        limit = self.max_body_bytes

        async def limited_receive() -> Message:
            nonlocal pulled
            if pulled > limit:
                raise _BodyTooLarge(limit)
            message = await receive()
            if message["type"] == "http.request":
                pulled += len(message.get("body", b""))
                if pulled > limit:
                    raise _BodyTooLarge(limit)  # FastAPI's body parsing answers it with 413
            return message

        async def send_with_headers(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                present = {bytes(k).lower() for k, _ in message.get("headers", [])}
                extra = [
                    (k.encode(), v.encode())
                    for k, v in _SECURITY_HEADERS.items()
                    if k.encode() not in present
                ]
                message["headers"] = [*message.get("headers", []), *extra]
            await send(message)

        try:
            await self.app(scope, limited_receive, send_with_headers)
        except Exception as exc:
            # The cap was hit where no handler answered it: a streaming response (SSE) reading on to
            # notice a disconnect, wrapped by Starlette as "response already started". Answer 413 if
            # nothing was sent yet; otherwise end here, and the server drops the connection with the
            # rest of the body unread.
            if not _caused_by(exc, _BodyTooLarge):
                raise
            if not started:
                await _send_json(send, 413, f"request body over {limit} bytes")

    def _problem(self, scope: Scope, headers: dict[str, str]) -> tuple[int, str] | None:
        host = headers.get("host", "")
        hostname = urlsplit(f"//{host}").hostname or ""
        if self.token is None and not is_loopback_host(hostname):
            return 403, f"host {host!r} refused: without PSE_WEB_TOKEN only loopback host names are served"
        changes_state = scope["method"] in _STATE_CHANGING
        origin = headers.get("origin")
        if origin == "null":
            if changes_state:
                return 403, "`Origin: null` (a sandboxed frame, a data: page) may not change state"
        elif origin is not None and urlsplit(origin).netloc.lower() != host.lower():
            return 403, f"cross-origin request from {origin!r} refused"
        path: str = scope["path"]
        if (
            self.token is not None
            and (path == "/api" or path.startswith("/api/"))
            and not bearer_matches(headers.get("authorization", ""), self.token)
        ):
            return 401, _UNAUTHORIZED
        if changes_state:
            ctype = headers.get("content-type", "").split(";")[0].strip().lower()
            if ctype != "application/json" and not headers.get(CSRF_HEADER.lower()):
                wanted = f"`Content-Type: application/json` or `{CSRF_HEADER}: 1`"
                if ctype:
                    return 415, f"{ctype} refused: a {scope['method']} must send {wanted}"
                return 403, f"a {scope['method']} must send {wanted}"
        declared = headers.get("content-length")
        if declared is not None:
            if not declared.strip().isdigit():
                return 400, f"Content-Length {declared!r} is not a number"
            if int(declared) > self.max_body_bytes:
                return 413, f"a {declared.strip()} byte body is over the {self.max_body_bytes} byte limit"
        return None


def _caused_by(exc: BaseException, kind: type[BaseException]) -> bool:
    """True when `exc`, its causes or contexts, or the members of an exception group are a `kind`."""
    seen: set[int] = set()
    todo = [exc]
    while todo:
        current = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, kind):
            return True
        if isinstance(current, BaseExceptionGroup):
            todo.extend(current.exceptions)
        todo.extend(e for e in (current.__cause__, current.__context__) if e is not None)
    return False


_SECURITY_HEADERS = {
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    "content-security-policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
    ),
}


async def _send_json(send: Send, status: int, detail: str, extra: dict[str, str] | None = None) -> None:
    """An answer given before the app ran; `Connection: close`, as an unread body may still be on its way."""
    body = json.dumps({"detail": detail}).encode()
    headers = {
        "content-type": "application/json",
        "content-length": str(len(body)),
        "connection": "close",
        **_SECURITY_HEADERS,
        **(extra or {}),
    }
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(k.encode(), v.encode()) for k, v in headers.items()],
        }
    )
    await send({"type": "http.response.body", "body": body})


# ---- reading run folders ----------------------------------------------------------------------------


def _workspace_parts(relative: str) -> list[str]:
    """The components of a workspace-relative URL path; HTTPException 400 when it is not a plain one."""
    if not relative or "\x00" in relative or "\\" in relative or relative.startswith("/"):
        raise HTTPException(400, f"file path {relative!r} must be relative to the run workspace")
    parts = PurePosixPath(relative).parts
    if ".." in parts:
        raise HTTPException(400, f"file path {relative!r} may not contain '..'")
    return list(parts)


def read_run_file(root: Path, run_id: str, name: str, *, max_bytes: int = MAX_TRACE_BYTES) -> bytes:
    """The bytes of `<root>/<run_id>/<name>` (e.g. `trace.json`), never through a symlink.

    Raises:
        HTTPException: 404 when missing, a symlink (the run folder or the file), or not a regular file;
            403 when it is over `max_bytes`.
    """
    try:
        return read_beneath(root, [run_id, name], max_bytes=max_bytes)
    except RunFileTooLarge as exc:
        raise HTTPException(403, f"run {run_id}: {exc.strerror}; the dashboard does not serve it") from None
    except OSError:
        raise HTTPException(404, f"no {name} in run {run_id!r}") from None


def open_workspace_file(root: Path, run_id: str, relative: str) -> tuple[BinaryIO, int]:
    """An open handle on a regular file in the run's workspace and its size; the caller closes it.

    Refuses absolute paths, `..`, backslashes and NUL before touching the disk (400), then walks from
    the runs directory without following any symlink: a symlinked workspace, folder or file, a FIFO or
    a device is answered as if absent (404). Files over `MAX_SERVED_FILE_BYTES` are refused (403).
    """
    parts = [run_id, "workspace", *_workspace_parts(relative)]
    try:
        fd = open_beneath(root, parts)
    except OSError:
        raise HTTPException(404, f"no file {relative!r} in the run workspace") from None
    handle = os.fdopen(fd, "rb")
    size = os.fstat(fd).st_size
    if size > MAX_SERVED_FILE_BYTES:
        handle.close()
        raise HTTPException(
            403, f"{relative} is {size} bytes; the dashboard serves files up to {MAX_SERVED_FILE_BYTES} bytes"
        )
    return handle, size


def workspace_listing(root: Path, run_id: str, *, max_files: int) -> list[dict[str, object]]:
    """The regular files of the run's workspace as `{"path", "size"}`, at most `max_files`.

    Symlinks are neither listed nor followed, FIFOs and devices are skipped unopened, hidden folders
    and `__pycache__` are not entered; a symlinked or missing workspace lists nothing.
    """
    found = regular_files_beneath(
        root,
        [run_id, "workspace"],
        max_files=max_files,
        max_depth=MAX_LISTING_DEPTH,
        skip_dir=lambda name: name.startswith(".") or name == "__pycache__",
    )
    return [{"path": path, "size": size} for path, size in found]
