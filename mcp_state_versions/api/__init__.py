"""The HTTP API: the same answers the model gets, for a front end or any other client.

``GET /threads/{id}/state/{key}?turn=N`` and ``inspect_state(key, turn=N)`` answer one
question, so they run one piece of code: both call
:func:`mcp_state_versions.walk.resolve.resolve_turn` (ring first, checkpoint walk second) on the
thread's present. A route never has its own idea of what a turn is.

The app is one router per resource (:mod:`.threads`, :mod:`.state`), the dependencies they
share (:mod:`.access`: the caller, the history, the thread's present) and the errors
(:mod:`.problems`). Every route reads the thread's newest branch, or with
``?checkpoint_id=`` the branch that ends at that checkpoint; ``?namespace=`` reads a
persistent subgraph's state.

Status codes follow the answers: 200 with the value; 404 ``turn_never_happened`` (with how
many turns the thread has had); 410 ``turn_not_retained`` (with the retained turns); 404
``key_not_set_yet``; 404 ``unknown_key``, ``unknown_thread`` and ``unknown_checkpoint``; 422
for a malformed request; 500 ``damaged_state`` for a checkpoint storage cannot give back; 503
``store_unavailable`` (with ``Retry-After``) while the store does not answer. Every error is
Problem Details JSON (:mod:`.problems`). Keys contain ``/`` and are taken from the rest of
the path; a ``/`` inside a thread id is sent as ``%2F``, and a path segment of dots (``..``)
behind a ``~`` (:mod:`.paths`).

Access: with a token (argument, or the ``MCP_STATE_VERSIONS_API_TOKEN`` environment variable)
every route requires ``Authorization: Bearer <token>``; an ``authorize(request, thread_id)``
hook can further allow or refuse a caller per thread (403). Install with the ``api`` extra.
"""

# No ``from __future__ import annotations``: FastAPI reads route annotations at runtime.
import asyncio
import os
from collections.abc import Callable, Sequence
from importlib.metadata import version
from typing import Any

try:
    from fastapi import Depends, FastAPI, Request
    from fastapi.staticfiles import StaticFiles
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError(
        "the HTTP API needs the 'api' extra: pip install 'mcp-state-versions[api]'"
    ) from error
from langgraph.checkpoint.base import BaseCheckpointSaver

from ..retention.sweep import SweepSchedule, sweeping
from . import page, state, threads
from .access import Authorize, Settings, authenticated
from .paths import EncodedSlashes
from .problems import install, respond, unavailable

__all__ = ["REQUEST_DEADLINE_S", "TOKEN_ENV", "Authorize", "create_app"]

TOKEN_ENV = "MCP_STATE_VERSIONS_API_TOKEN"
"""Environment variable holding the bearer token the API requires, when set."""

REQUEST_DEADLINE_S = 4.0
"""How long a request may wait on the store before it is answered 503 ``store_unavailable``.

A saver runs its queries one at a time behind a lock, and while its database is away each
waits for a connection; without a deadline requests queue without bound and hang for as long
as the outage lasts. With one, every request is answered within the deadline, and the first
request after the database answers again is served."""


def create_app(
    checkpointer: BaseCheckpointSaver | Callable[[], BaseCheckpointSaver],
    *,
    token: str | None = None,
    authorize: Authorize | None = None,
    allowed_keys: Sequence[str] | None = None,
    public_docs: bool = False,
    deadline: float = REQUEST_DEADLINE_S,
    sweep: SweepSchedule | None = None,
) -> FastAPI:
    """An ASGI app serving a checkpointer's threads' state, present and past.

    ``checkpointer`` is a saver, or a function returning one, called per request: the LangGraph
    Agent Server attaches its checkpointer at run time, so an app mounted in the server reads
    it through such a function. ``token`` (default: ``$MCP_STATE_VERSIONS_API_TOKEN``) turns on
    bearer authentication for every route; ``authorize`` is called per request with the thread
    id; ``allowed_keys`` (glob patterns) limits the keys served, as it does for the tool.
    ``deadline`` bounds the seconds a request waits on the store (:data:`REQUEST_DEADLINE_S`).
    ``sweep`` runs a background sweeper for as long as the app runs (its lifespan; see
    :func:`mcp_state_versions.retention.sweep.sweeping`; an app mounted inside another runs it in
    the outer app's lifespan instead, as the Agent Server example does).

    With a token, the schema (``/openapi.json``) needs the token too, unless
    ``public_docs=True``: a schema names what the API holds, and a deployment
    that locks its data decides whether its description is public. Without a token both are
    public.
    """
    required = token if token is not None else os.environ.get(TOKEN_ENV) or None
    docs_open = required is None or public_docs
    app = FastAPI(
        title="mcp-state-versions",
        summary="Session state of LangGraph threads, as of any turn.",
        version=version("mcp-state-versions"),
        openapi_url="/openapi.json" if docs_open else None,
        docs_url=None,  # FastAPI's loads Swagger UI from a CDN; page.docs serves it from here
        redoc_url=None,
        lifespan=(lambda _: sweeping(checkpointer, sweep)) if sweep is not None else None,
    )
    app.state.settings = Settings(checkpointer, required, authorize, allowed_keys)
    install(app)
    app.include_router(threads.router)
    app.include_router(state.router)
    app.include_router(page.router)
    app.mount("/static/reference", StaticFiles(directory=page.REFERENCE_ASSETS), name="reference")
    app.mount("/static", StaticFiles(directory=str(page.ASSETS)), name="static")

    if not docs_open:

        @app.get("/openapi.json", include_in_schema=False, dependencies=[Depends(authenticated)])
        async def schema() -> dict[str, Any]:
            return app.openapi()

    app.add_middleware(_Deadline, seconds=deadline)
    app.add_middleware(EncodedSlashes)
    app.add_middleware(_SecurityHeaders)
    return app


SECURITY_HEADERS = (
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
)
"""Sent with every response: no type sniffing, no framing (the page is never embedded, so no
click-jacking), no referrer carrying a thread id to another site."""


class _SecurityHeaders:
    """ASGI middleware adding :data:`SECURITY_HEADERS` to every response (the page adds its
    own ``Content-Security-Policy``: :data:`.page.CONTENT_SECURITY_POLICY`)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def sending(message: Any) -> None:
            if message["type"] == "http.response.start":
                names = {name.lower() for name, _ in message.get("headers", ())}
                extra = [header for header in SECURITY_HEADERS if header[0] not in names]
                message = {**message, "headers": [*message.get("headers", ()), *extra]}
            await send(message)

        await self.app(scope, receive, sending)


class _Deadline:
    """ASGI middleware: a request not answered within ``seconds`` is answered 503.

    The request's own task is cancelled, but not waited for: a pool or a driver may hold on
    to a cancelled query for as long as its own timeout, and the point is that the client is
    answered now. Whatever that task sends later is dropped.
    """

    def __init__(self, app: Any, seconds: float) -> None:
        self.app, self.seconds = app, seconds

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = expired = False

        async def sending(message: Any) -> None:
            nonlocal started
            if expired:
                return
            started = started or message["type"] == "http.response.start"
            await send(message)

        task = asyncio.ensure_future(self.app(scope, receive, sending))
        done, _ = await asyncio.wait({task}, timeout=self.seconds)
        if task in done:
            task.result()
            return
        expired = True
        task.cancel()
        if not started:
            response = respond(
                Request(scope),
                unavailable(f"the checkpoint store did not answer within {self.seconds:g} s"),
            )
            await response(scope, receive, send)
