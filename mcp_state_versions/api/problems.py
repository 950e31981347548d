"""Errors over HTTP: every failure is Problem Details (RFC 9457) with a stable ``code``.

A client branches on ``code`` (``turn_not_retained``, ``damaged_state`` ...) and shows
``detail`` to a person; ``status`` repeats the HTTP status, ``title`` names the kind of
failure, and ``type`` is the URL of a page this app serves for the code (``problems/<code>``,
under wherever it is mounted), which says what it means and what to do. The outcomes of a turn
read keep the extra members they always carried (``total``, ``retained``, ``first_turn``).

Two failures come from storage rather than from the request. A damaged checkpoint is 500
``damaged_state``, naming the thread and the turn (other turns still read). A store that does
not answer is 503 ``store_unavailable`` with ``Retry-After``, given within the request
deadline rather than after however long a pool or a lock would have kept the request waiting;
one that answered that the server's role may not read what it needs is 503 without it.
"""

from __future__ import annotations

import html
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..walk.history import DamagedState, StoreUnavailable

__all__ = ["PROBLEM_CODES", "Problem", "ProblemError", "RetainedTurns", "install", "respond"]

PROBLEM_CODES: dict[str, str] = {
    "turn_never_happened": "The thread has not had that turn yet (``total`` says how many it "
    "has had). Ask for a turn from 1 to ``total``.",
    "key_not_set_yet": "The key exists now, but no tool had set it at the end of that turn "
    "(``first_turn`` says when it was first set). Ask for a later turn.",
    "unknown_key": "No such key in the thread's state; the detail names close matches. List "
    "the keys with ``GET threads/{id}/state``.",
    "unknown_thread": "No thread with that id in this store (in that namespace, or on that "
    "branch). List the threads with ``GET threads``.",
    "unknown_checkpoint": "No checkpoint with that id in the thread. Leave out "
    "``checkpoint_id`` to read the newest.",
    "turn_not_retained": "The turn happened, but retention pruned the history it would be read "
    "from (``retained`` says which turns are kept). Ask for a retained turn.",
    "no_turn_history": "This deployment keeps no history to read an earlier turn from: only "
    "the current value can be read.",
    "value_evicted": "The value was too large to keep among the key's earlier versions, so that "
    "turn's value cannot be read; the current value can.",
    "repeated_turn": "``turn`` was sent more than once. Send it once: ``?turn=N``.",
    "invalid_request": "A parameter is missing or malformed; the detail names it.",
    "unauthorized": "This server needs its API token: send ``Authorization: Bearer <token>``.",
    "forbidden": "The server's authorize hook refused this caller for this thread.",
    "authorize_failed": "The server's authorize hook failed, so nothing was read; the "
    "server's log has the details.",
    "damaged_state": "The stored state is damaged where the read needed it (the detail names "
    "the thread and the turn); other turns still read. Restore the store from a backup, or "
    "prune the damaged part.",
    "store_unavailable": "The store did not answer in time (try again after ``Retry-After``), "
    "or refused the server's role what it needs (grant it; waiting will not help).",
    "not_found": "No such route. The API's reference is at ``docs``.",
    "method_not_allowed": "The route exists but not for this method; every route is ``GET``.",
    "http_error": "The request failed at the HTTP level; the detail says how.",
    "internal_error": "The server failed to answer; its log has the details.",
}
"""Every problem ``code`` the API sends, with what it means and what to do: the page at each
problem's ``type``."""

MEDIA_TYPE = "application/problem+json"

RETRY_AFTER_S = 5
"""What ``Retry-After`` tells a client to wait while the store does not answer."""


class RetainedTurns(BaseModel):
    """The retained turns, ``first`` to ``last``: a prune keeps the latest, so they are a span."""

    first: int
    last: int


class Problem(BaseModel):
    """An error response (RFC 9457 Problem Details, with the library's ``code``)."""

    type: str
    title: str
    status: int
    detail: str
    code: str
    thread_id: str | None = None
    turn: int | None = None
    total: int | None = None
    retained: RetainedTurns | None = None
    first_turn: int | None = None


_TITLES = {
    400: "Bad request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not found",
    405: "Method not allowed",
    410: "Gone",
    422: "Unprocessable request",
    500: "Stored state is damaged",
    503: "Store unavailable",
}


class ProblemError(Exception):
    """Raised by a route or dependency: answered as the problem it describes."""

    def __init__(
        self,
        status: int,
        code: str,
        detail: str,
        *,
        headers: dict[str, str] | None = None,
        **members: Any,
    ) -> None:
        super().__init__(detail)
        self.status, self.code, self.detail = status, code, detail
        self.headers = headers
        self.members = {name: value for name, value in members.items() if value is not None}


def problem_type(request: Request, code: str) -> str:
    """The URL of the page about ``code``, under wherever the app is mounted."""
    mounted = request.scope.get("root_path", "").rstrip("/")  # (base_url drops a Mount's)
    return str(request.url.replace(path=f"{mounted}/problems/{code}", query="", fragment=""))


def respond(request: Request, error: ProblemError) -> JSONResponse:
    body = Problem(
        type=problem_type(request, error.code),
        title=_TITLES.get(error.status, "Error"),
        status=error.status,
        detail=error.detail,
        code=error.code,
        **error.members,
    )
    return JSONResponse(
        body.model_dump(exclude_none=True),
        status_code=error.status,
        headers=error.headers,
        media_type=MEDIA_TYPE,
    )


def unavailable(detail: str, *, retry: bool = True) -> ProblemError:
    """503 ``store_unavailable``: with ``Retry-After`` where the store did not answer in time;
    without it (``retry=False``) where it answered that the server's role may not read what the
    request needs, which waiting will not change."""
    if not retry:
        return ProblemError(503, "store_unavailable", detail)
    return ProblemError(
        503,
        "store_unavailable",
        f"{detail}; the request was not served, try again in {RETRY_AFTER_S} s",
        headers={"Retry-After": str(RETRY_AFTER_S)},
    )


def problem_media_types(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with every error response (4xx, 5xx) under ``application/problem+json``, the
    type it is sent as (FastAPI writes ``application/json`` for a response model)."""
    for path in schema.get("paths", {}).values():
        for operation in path.values():
            for status, response in (operation.get("responses") or {}).items():
                content = response.get("content") or {}
                if status[:1] in ("4", "5") and "application/json" in content:
                    content[MEDIA_TYPE] = content.pop("application/json")
    return schema


def install(app: FastAPI) -> None:
    """Answer every error of ``app`` as a problem, and say so in its schema."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = problem_media_types(build())
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]

    async def problem(request: Request, error: Exception) -> JSONResponse:
        assert isinstance(error, ProblemError)
        return respond(request, error)

    async def damaged(request: Request, error: Exception) -> JSONResponse:
        assert isinstance(error, DamagedState)
        return respond(
            request,
            ProblemError(
                500, "damaged_state", str(error), thread_id=error.thread_id, turn=error.turn
            ),
        )

    async def store(request: Request, error: Exception) -> JSONResponse:
        refused = isinstance(error, StoreUnavailable) and error.refused
        return respond(request, unavailable(str(error), retry=not refused))

    async def invalid(request: Request, error: Exception) -> JSONResponse:
        assert isinstance(error, RequestValidationError)
        first = error.errors()[0] if error.errors() else {}
        where = ".".join(str(part) for part in first.get("loc", ()) if part != "body")
        message = f"{where}: {first.get('msg', 'invalid')}" if where else "invalid request"
        return respond(request, ProblemError(422, "invalid_request", message))

    async def http(request: Request, error: Exception) -> JSONResponse:
        assert isinstance(error, StarletteHTTPException)
        code = {404: "not_found", 405: "method_not_allowed"}.get(error.status_code, "http_error")
        return respond(
            request,
            ProblemError(
                error.status_code,
                code,
                str(error.detail),
                headers=None if error.headers is None else dict(error.headers),
            ),
        )

    async def unexpected(request: Request, error: Exception) -> JSONResponse:
        # (Starlette logs it and re-raises it for the server, after this answer is sent)
        return respond(
            request,
            ProblemError(
                500,
                "internal_error",
                f"the server failed to answer ({type(error).__name__}); its log has the details",
            ),
        )

    @app.get("/problems/{code}", response_class=HTMLResponse, include_in_schema=False)
    async def about(code: str) -> HTMLResponse:
        if code not in PROBLEM_CODES:
            raise ProblemError(404, "not_found", f"no problem code {code!r}")
        text = html.escape(PROBLEM_CODES[code]).replace("``", "")
        return HTMLResponse(
            f'<!doctype html><html lang="en"><meta charset="utf-8"><title>{code} · '
            f"mcp-state-versions</title><h1><code>{code}</code></h1><p>{text}</p></html>",
            headers={"Content-Security-Policy": "default-src 'none'"},
        )

    app.add_exception_handler(Exception, unexpected)
    app.add_exception_handler(ProblemError, problem)
    app.add_exception_handler(DamagedState, damaged)
    app.add_exception_handler(StoreUnavailable, store)
    app.add_exception_handler(RequestValidationError, invalid)
    app.add_exception_handler(StarletteHTTPException, http)
