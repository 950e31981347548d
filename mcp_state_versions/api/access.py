"""What every route depends on: the caller allowed in, the history to read, the thread's
present. The routers declare these; :func:`mcp_state_versions.api.create_app` configures them
(:class:`Settings`, kept on ``app.state``)."""

# No ``from __future__ import annotations``: FastAPI reads these annotations at runtime.
import inspect
import logging
import secrets
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, Path, Query, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from langgraph.checkpoint.base import BaseCheckpointSaver

from ..backends import storable
from ..walk.checkpoints import CheckpointHistory
from ..walk.history import ThreadPresent
from ..walk.resolve import versioned_entries, visible_keys
from .problems import Problem, ProblemError

__all__ = [
    "PROBLEMS",
    "Authorize",
    "History",
    "Settings",
    "Thread",
    "allowed",
    "authenticated",
    "settings",
]

Authorize = Callable[[Request, str], bool | Awaitable[bool]]
"""``authorize(request, thread_id)``: whether this caller may read this thread."""

_log = logging.getLogger("mcp_state_versions.api")

PROBLEMS: dict[int | str, dict[str, Any]] = {
    401: {"model": Problem, "description": "A bearer token is required and was missing or wrong"},
    403: {"model": Problem, "description": "The authorize hook refused this caller"},
    404: {"model": Problem, "description": "Unknown thread or key, turn never had, key not set"},
    500: {"model": Problem, "description": "The stored state is damaged (damaged_state)"},
    503: {"model": Problem, "description": "The store is not answering (store_unavailable)"},
}


@dataclass(frozen=True)
class Settings:
    """How an app reads: its saver (or a function giving one per request), who may read."""

    checkpointer: BaseCheckpointSaver | Callable[[], BaseCheckpointSaver]
    token: str | None
    authorize: Authorize | None
    allowed_keys: Sequence[str] | None

    def saver(self) -> BaseCheckpointSaver:
        found = self.checkpointer
        return found if isinstance(found, BaseCheckpointSaver) else found()


def settings(request: Request) -> Settings:
    found: Settings = request.app.state.settings
    return found


_bearer = HTTPBearer(auto_error=False)


async def authenticated(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)] = None,
) -> None:
    required = settings(request).token
    if required is not None and (
        credentials is None
        or not secrets.compare_digest(credentials.credentials.encode(), required.encode())
    ):
        raise ProblemError(
            401,
            "unauthorized",
            "send Authorization: Bearer <token>",
            headers={"WWW-Authenticate": "Bearer"},
        )


async def allowed(request: Request, thread_id: str) -> bool:
    """Whether the ``authorize`` hook lets this caller read ``thread_id`` (no hook: yes)."""
    authorize = settings(request).authorize
    if authorize is None:
        return True
    try:
        verdict = authorize(request, thread_id)
        if inspect.isawaitable(verdict):
            verdict = await verdict
    except Exception as error:  # the host's hook: its failure is answered, and logged
        _log.exception("the authorize hook raised for thread %r", thread_id)
        raise ProblemError(
            500,
            "authorize_failed",
            f"the server's authorize hook failed ({type(error).__name__}); nothing was read. "
            "Its log has the details",
        ) from None
    return bool(verdict)


async def reader(
    request: Request,
    namespace: Annotated[
        str, Query(max_length=512, description="A persistent subgraph's namespace")
    ] = "",
    checkpoint_id: Annotated[
        str | None,
        Query(
            max_length=64,
            description="Read the branch that ends at this checkpoint (default: the newest)",
        ),
    ] = None,
) -> CheckpointHistory:
    return CheckpointHistory(
        settings(request).saver(), namespace=namespace, checkpoint_id=checkpoint_id or None
    )


History = Annotated[CheckpointHistory, Depends(reader)]


async def _single_turn(request: Request) -> None:
    """FastAPI keeps the last of repeated parameters; a caller sending two turns meant
    something this API cannot guess, so it is told."""
    if len(request.query_params.getlist("turn")) > 1:
        raise ProblemError(422, "repeated_turn", "send turn once: ?turn=N")


async def thread(
    request: Request,
    history: History,
    thread_id: Annotated[str, Path(description="The thread's id", max_length=1024)],
    _auth: Annotated[None, Depends(authenticated)] = None,
    _turn: Annotated[None, Depends(_single_turn)] = None,
) -> ThreadPresent:
    unknown = ProblemError(404, "unknown_thread", f"no thread {thread_id!r} in this checkpointer")
    given = history.checkpoint_id
    if not storable(thread_id) or not storable(history.namespace) or not storable(given or ""):
        # No saver can hold such an id (PostgreSQL text cannot contain NUL, every store
        # wants valid text), so no thread has it; asking the store would only fail.
        raise unknown
    if not await allowed(request, thread_id):
        raise ProblemError(403, "forbidden", f"this caller may not read thread {thread_id!r}")
    present = await history.present(thread_id, damage_ok=True)
    if present is None:
        if given is not None:
            raise ProblemError(
                404,
                "unknown_checkpoint",
                f"thread {thread_id!r} has no checkpoint {given!r} in this namespace",
            )
        raise unknown
    # Only versioned entries are served; a raw value stored without the reducer is not.
    served = versioned_entries(visible_keys(present.tool_state, settings(request).allowed_keys))
    return ThreadPresent(served, present.turn, present.damage)


Thread = Annotated[ThreadPresent, Depends(thread)]
