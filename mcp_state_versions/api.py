"""The HTTP API: the same answers the model gets, for a front end or any other client.

``GET /threads/{id}/state/{key}?turn=N`` and ``inspect_state(key, turn=N)`` answer one
question, so they run one piece of code: both call
:func:`mcp_state_versions.history.resolve_turn` (ring first, checkpoint walk second) on the
thread's present. A route never has its own idea of what a turn is.

Status codes follow the answers: 200 with the value; 404 ``turn_never_happened`` (with how many
turns the thread has had); 410 ``turn_not_retained`` (with the retained turns); 404
``key_not_set_yet``; 404 ``unknown_key`` and ``unknown_thread``; 422 for a malformed turn. Keys
contain ``/`` and are taken from the rest of the path.

Access: with a token (argument, or the ``MCP_STATE_VERSIONS_API_TOKEN`` environment variable)
every route requires ``Authorization: Bearer <token>``; an ``authorize(request, thread_id)``
hook can further allow or refuse a caller per thread (403). Install with the ``api`` extra.
"""

# No ``from __future__ import annotations`` here: FastAPI reads route annotations at runtime,
# and the dependency alias below is local to create_app.
import inspect
import os
import secrets
from collections.abc import Awaitable, Callable, Sequence
from typing import Annotated, Any, Literal

from fastapi import Depends, FastAPI, HTTPException, Path, Query, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from langgraph.checkpoint.base import BaseCheckpointSaver
from pydantic import BaseModel, JsonValue

from .checkpoint_walk import CheckpointHistory
from .history import (
    Found,
    ThreadPresent,
    TurnAnswer,
    UnknownKey,
    outcome,
    resolve_turn,
    retained_span,
)
from .inspect_tool import (
    describe_answer,
    entry_summary,
    eviction_note,
    versioned_entries,
    visible_keys,
)
from .versions import version_spans

__all__ = ["TOKEN_ENV", "Authorize", "create_app"]

TOKEN_ENV = "MCP_STATE_VERSIONS_API_TOKEN"
"""Environment variable holding the bearer token the API requires, when set."""

Authorize = Callable[[Request, str], bool | Awaitable[bool]]
"""``authorize(request, thread_id)``: whether this caller may read this thread."""


class KeySummary(BaseModel):
    key: str
    shape: str
    tool: str | None
    turn: int
    since: int
    versions: int
    evicted: bool


class StateListing(BaseModel):
    thread_id: str
    turn: int
    keys: list[KeySummary]


class KeyValue(BaseModel):
    thread_id: str
    key: str
    turn: int | None
    value: JsonValue
    since: int | None
    until: int | None
    source: Literal["current", "ring", "history"]
    versions: int


class VersionItem(BaseModel):
    since: int
    until: int | None
    current: bool
    kept: bool
    value: JsonValue


class KeyVersions(BaseModel):
    thread_id: str
    key: str
    versions: int
    older_not_kept: int
    items: list[VersionItem]


class RetainedTurns(BaseModel):
    """The retained turns, ``first`` to ``last``: a prune keeps the latest, so they are a span."""

    first: int
    last: int


class Turns(BaseModel):
    thread_id: str
    total: int
    retained: RetainedTurns | None


class Problem(BaseModel):
    code: str
    message: str
    total: int | None = None
    retained: RetainedTurns | None = None
    first_turn: int | None = None


_PROBLEMS: dict[int | str, dict[str, Any]] = {
    401: {"model": Problem, "description": "A bearer token is required and was missing or wrong"},
    403: {"model": Problem, "description": "The authorize hook refused this caller"},
    404: {"model": Problem, "description": "Unknown thread or key, turn never had, key not set"},
}


def _storable(text: str) -> bool:
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _problem(status: int, code: str, message: str, **extra: Any) -> HTTPException:
    return HTTPException(status, Problem(code=code, message=message, **extra).model_dump())


def create_app(
    checkpointer: BaseCheckpointSaver | Callable[[], BaseCheckpointSaver],
    *,
    token: str | None = None,
    authorize: Authorize | None = None,
    allowed_keys: Sequence[str] | None = None,
    public_docs: bool = False,
) -> FastAPI:
    """An ASGI app serving a checkpointer's threads' state, present and past.

    ``checkpointer`` is a saver, or a function returning one, called per request: the LangGraph
    Agent Server attaches its checkpointer at run time, so an app mounted in the server reads
    it through such a function. ``token`` (default: ``$MCP_STATE_VERSIONS_API_TOKEN``) turns on
    bearer authentication for every route; ``authorize`` is called per request with the thread
    id; ``allowed_keys`` (glob patterns) limits the keys served, as it does for the tool. Every
    route takes ``?namespace=`` to read a persistent subgraph's state (default: the graph's).

    With a token, the schema (``/openapi.json``) needs the token too and ``/docs`` is not
    served, unless ``public_docs=True``: a schema names what the API holds, and a deployment
    that locks its data decides whether its description is public. Without a token both are
    public.
    """

    def history_of(namespace: str) -> CheckpointHistory:
        saver = checkpointer if isinstance(checkpointer, BaseCheckpointSaver) else checkpointer()
        return CheckpointHistory(saver, namespace=namespace)

    required = token if token is not None else os.environ.get(TOKEN_ENV) or None
    bearer = HTTPBearer(auto_error=False)
    docs_open = required is None or public_docs
    app = FastAPI(
        title="mcp-state-versions",
        summary="Session state of LangGraph threads, as of any turn.",
        version="0.1.0",
        openapi_url="/openapi.json" if docs_open else None,
        docs_url="/docs" if docs_open else None,
        redoc_url=None,
    )

    async def authenticated(
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)] = None,
    ) -> None:
        if required is not None and (
            credentials is None
            or not secrets.compare_digest(credentials.credentials.encode(), required.encode())
        ):
            raise HTTPException(
                401,
                Problem(
                    code="unauthorized", message="send Authorization: Bearer <token>"
                ).model_dump(),
                headers={"WWW-Authenticate": "Bearer"},
            )

    if not docs_open:

        @app.get("/openapi.json", include_in_schema=False, dependencies=[Depends(authenticated)])
        async def schema() -> dict[str, Any]:
            return app.openapi()

    async def single_turn(request: Request) -> None:
        """FastAPI keeps the last of repeated parameters; a caller sending two turns meant
        something this API cannot guess, so it is told."""
        if len(request.query_params.getlist("turn")) > 1:
            raise _problem(422, "repeated_turn", "send turn once: ?turn=N")

    async def reader(
        namespace: Annotated[
            str, Query(max_length=512, description="A persistent subgraph's namespace")
        ] = "",
    ) -> CheckpointHistory:
        return history_of(namespace)

    History = Annotated[CheckpointHistory, Depends(reader)]

    async def thread(
        request: Request,
        history: History,
        thread_id: Annotated[str, Path(description="The thread's id", max_length=1024)],
        _auth: Annotated[None, Depends(authenticated)] = None,
        _turn: Annotated[None, Depends(single_turn)] = None,
    ) -> ThreadPresent:
        if not _storable(thread_id) or not _storable(history.namespace):
            # No saver can hold such an id (PostgreSQL text cannot contain NUL, every store
            # wants valid text), so no thread has it; asking the store would only fail.
            raise _problem(404, "unknown_thread", f"no thread {thread_id!r} in this checkpointer")
        if authorize is not None:
            allowed = authorize(request, thread_id)
            if inspect.isawaitable(allowed):
                allowed = await allowed
            if not allowed:
                raise _problem(403, "forbidden", f"this caller may not read thread {thread_id!r}")
        present = await history.present(thread_id)
        if present is None:
            raise _problem(404, "unknown_thread", f"no thread {thread_id!r} in this checkpointer")
        # Only versioned entries are served; a raw value stored without the reducer is not.
        served = versioned_entries(visible_keys(present.tool_state, allowed_keys))
        return ThreadPresent(served, present.turn)

    Thread = Annotated[ThreadPresent, Depends(thread)]

    def entry_of(present: ThreadPresent, key: str) -> Any:
        entry = present.tool_state.get(key)
        if entry is None:
            answer = UnknownKey(key)
            raise _problem(
                404, "unknown_key", describe_answer(answer, keys=list(present.tool_state))
            )
        return entry

    @app.get("/threads/{thread_id}/state", responses=_PROBLEMS, summary="List keys")
    async def list_state(thread_id: str, present: Thread) -> StateListing:
        keys = [
            KeySummary(key=key, **entry_summary(entry))
            for key, entry in sorted(present.tool_state.items())
        ]
        return StateListing(thread_id=thread_id, turn=present.turn, keys=keys)

    @app.get("/threads/{thread_id}/turns", responses=_PROBLEMS, summary="Turns and retention")
    async def list_turns(thread_id: str, present: Thread, history: History) -> Turns:
        index = await history.turns(thread_id)
        span = retained_span(index.retained)
        return Turns(
            thread_id=thread_id,
            total=index.total,
            retained=None if span is None else RetainedTurns(**span),
        )

    @app.get(
        "/threads/{thread_id}/state/{key:path}/versions",
        responses=_PROBLEMS,
        summary="Every version of a key the entry keeps",
    )
    async def key_versions(
        thread_id: str,
        key: str,
        present: Thread,
        history: History,
        turn: Annotated[int | None, Query(ge=1, le=2**31, description="End of this turn")] = None,
    ) -> KeyVersions | KeyValue:
        if f"{key}/versions" in present.tool_state and key not in present.tool_state:
            # A key whose last part is "versions" (a field named so): read it, as of the turn.
            return await read_key(thread_id, f"{key}/versions", present, history, turn)
        if turn is not None:
            raise _problem(
                422,
                "turn_not_applicable",
                "/versions lists every version the entry keeps; read one turn at "
                f"/threads/{thread_id}/state/{key}?turn={turn}",
            )
        entry = entry_of(present, key)
        spans = version_spans(entry)
        items = [
            VersionItem(since=s.since, until=s.until, current=s.current, kept=s.kept, value=s.value)
            for s in spans
        ]
        return KeyVersions(
            thread_id=thread_id,
            key=key,
            versions=entry["versions"],
            older_not_kept=entry["versions"] - len(spans),
            items=items,
        )

    @app.get(
        "/threads/{thread_id}/state/{key:path}",
        responses={**_PROBLEMS, 410: {"model": Problem, "description": "Turn no longer retained"}},
        summary="A key's value, now or at the end of a turn",
    )
    async def read_key(
        thread_id: str,
        key: str,
        present: Thread,
        history: History,
        turn: Annotated[int | None, Query(ge=1, le=2**31, description="End of this turn")] = None,
    ) -> KeyValue:
        entry = entry_of(present, key)
        if turn is None:
            if "value" not in entry:
                raise _problem(410, "value_evicted", eviction_note(key, entry, flag="?turn="))
            return KeyValue(
                thread_id=thread_id,
                key=key,
                turn=None,
                value=entry["value"],
                since=entry["since"],
                until=None,
                source="current",
                versions=entry["versions"],
            )
        answer: TurnAnswer = await resolve_turn(
            present.tool_state,
            key,
            turn,
            current_turn=present.turn,
            history=history,
            thread_id=thread_id,
        )
        if isinstance(answer, Found):
            return KeyValue(
                thread_id=thread_id,
                key=key,
                turn=turn,
                value=answer.value,
                since=answer.since,
                until=answer.until,
                source=answer.source,
                versions=entry["versions"],
            )
        result = outcome(answer)
        message = describe_answer(answer, keys=list(present.tool_state))
        raise _problem(result.status, result.code, message, **result.details)

    return app
