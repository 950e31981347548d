"""Routes of threads as wholes: the list of them, newest first, one thread's turns, and its
timeline (every key over every retained turn, which the page draws)."""

# No ``from __future__ import annotations``: FastAPI reads route annotations at runtime.
from dataclasses import asdict
from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, Request

from ..state.versions import answers_from
from ..walk.conversation import turn_conversation
from ..walk.history import retained_span
from ..walk.resolve import key_allowed, resolve_timeline
from ..walk.threads import list_threads
from .access import PROBLEMS, History, Thread, allowed, authenticated, settings
from .models import (
    KeyTimelineItem,
    ThreadItem,
    ThreadList,
    TimelineBody,
    ToolCallItem,
    TurnConversationBody,
    Turns,
)
from .paths import PathRoute
from .problems import Problem, ProblemError, RetainedTurns

__all__ = ["router"]

router = APIRouter(prefix="/threads", tags=["threads"], route_class=PathRoute)


@router.get(
    "", responses=PROBLEMS, summary="Threads, newest first", dependencies=[Depends(authenticated)]
)
async def threads(
    request: Request,
    limit: Annotated[int, Query(ge=1, le=500, description="Threads per page")] = 50,
    before: Annotated[
        str | None, Query(max_length=1100, description="A page's next cursor")
    ] = None,
    contains: Annotated[
        str | None, Query(max_length=1024, description="Only ids containing this")
    ] = None,
) -> ThreadList:
    # A caller sees only the threads it may read, and the cursor is the last of those: a
    # cursor past a thread it may not read would tell that thread's newest checkpoint id.
    # Pages of threads it may not read are gone past until the page is full or none are left.
    items: list[ThreadItem] = []
    cursors: list[str] = []
    cursor, more = before, True
    while more and len(items) < limit:
        page = await list_threads(
            settings(request).saver(), limit=limit, before=cursor, contains=contains
        )
        for summary in page.threads:
            if len(items) == limit:
                break
            if not await allowed(request, summary.thread_id):
                continue
            items.append(
                ThreadItem(
                    thread_id=summary.thread_id,
                    turns=summary.turns,
                    last_write=summary.last_write,
                    stored_bytes=summary.stored_bytes,
                    damage=summary.damage,
                )
            )
            cursors.append(summary.cursor)
        cursor, more = page.next, page.next is not None
    full = len(items) == limit and (more or cursors[-1] != page.threads[-1].cursor)
    return ThreadList(threads=items, next=cursors[-1] if full else None)


@router.get("/{thread_id}/turns", responses=PROBLEMS, summary="Turns and retention")
async def list_turns(thread_id: str, present: Thread, history: History) -> Turns:
    index = await history.turns(thread_id)
    span = retained_span(index.retained)
    return Turns(
        thread_id=thread_id,
        total=index.total,
        retained=None if span is None else RetainedTurns(**span),
    )


@router.get(
    "/{thread_id}/timeline", responses=PROBLEMS, summary="Every key over the retained turns"
)
async def timeline(
    request: Request, thread_id: str, present: Thread, history: History
) -> TimelineBody:
    if present.damage is not None:
        raise present.damage
    allowed_keys = settings(request).allowed_keys
    found = await resolve_timeline(
        history, thread_id, visible=lambda key: key_allowed(key, allowed_keys)
    )
    span = retained_span(found.retained)
    entries = present.tool_state
    return TimelineBody(
        thread_id=thread_id,
        total=found.total,
        retained=None if span is None else RetainedTurns(**span),
        keys=[
            KeyTimelineItem(
                **asdict(row),
                known_from=answers_from(entries[row.key]) if row.key in entries else None,
            )
            for row in found.keys
        ],
    )


@router.get(
    "/{thread_id}/turns/{turn}",
    responses={**PROBLEMS, 410: {"model": Problem, "description": "Turn no longer retained"}},
    summary="What a turn was: its user message, tool calls and reply",
)
async def turn_conversation_of(
    thread_id: str, turn: Annotated[int, Path(ge=1)], present: Thread, history: History
) -> TurnConversationBody:
    found_messages = await history.turn_messages(thread_id, turn)
    if found_messages.messages is None:
        index = found_messages.index
        if turn > index.total:
            raise ProblemError(
                404,
                "turn_never_happened",
                f"thread {thread_id!r} has had {index.total} turns; there is no turn {turn}",
            )
        raise ProblemError(
            410, "turn_not_retained", f"turn {turn} of thread {thread_id!r} is no longer retained"
        )
    found = turn_conversation(found_messages.messages, found_messages.record)
    return TurnConversationBody(
        thread_id=thread_id,
        turn=turn,
        user=found.user,
        reply=found.reply,
        calls=[ToolCallItem(**asdict(call)) for call in found.calls],
        open=found.open,
        summary=found.summary,
    )
