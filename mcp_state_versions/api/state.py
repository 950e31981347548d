"""Routes of a thread's state: its keys, a key's value now or as of a turn, its versions."""

# No ``from __future__ import annotations``: FastAPI reads route annotations at runtime.
from typing import Annotated, Any

from fastapi import APIRouter, Query

from ..state.reducer import is_entry
from ..walk.history import Found, ThreadPresent, TurnAnswer, UnknownKey, outcome
from ..walk.resolve import (
    VersionRow,
    as_of,
    entry_at,
    resolve_past,
    resolve_turn,
    resolve_versions,
)
from ..wording.answers import entry_summary, eviction_status, status_line
from .access import PROBLEMS, History, Thread
from .models import KeySummary, KeyValue, KeyVersions, StateListing, VersionItem
from .paths import PathRoute
from .problems import Problem, ProblemError

__all__ = ["router"]

router = APIRouter(prefix="/threads/{thread_id}/state", tags=["state"], route_class=PathRoute)

Turn = Annotated[int | None, Query(ge=1, le=2**62, description="End of this turn")]

VERSIONS_PAGE = 100
"""Versions on one page of ``/versions`` unless ``?limit=`` says otherwise."""
MAX_VERSIONS_PAGE = 1000
"""The largest ``?limit=``: each version beyond a key's ring may cost a history read, and a
page must answer within the request's deadline."""


def _entry_of(present: ThreadPresent, key: str) -> Any:
    if present.damage is not None:
        raise present.damage
    entry = present.tool_state.get(key)
    if entry is None:
        message = status_line(UnknownKey(key), keys=list(present.tool_state))
        raise ProblemError(404, "unknown_key", message)
    return entry


@router.get("", responses=PROBLEMS, summary="List keys")
async def list_state(thread_id: str, present: Thread) -> StateListing:
    if present.damage is not None:
        raise present.damage
    keys = [
        KeySummary(key=key, **entry_summary(entry))
        for key, entry in sorted(present.tool_state.items())
    ]
    return StateListing(thread_id=thread_id, turn=present.turn, keys=keys)


@router.get("/{key:path}/versions", responses=PROBLEMS, summary="Every version a key has held")
async def key_versions(
    thread_id: str,
    key: str,
    present: Thread,
    history: History,
    turn: Annotated[
        int | None,
        Query(ge=1, le=2**62, description="List the versions as they stood at this turn's end"),
    ] = None,
    limit: Annotated[
        int, Query(ge=1, le=MAX_VERSIONS_PAGE, description="The most versions on one page")
    ] = VERSIONS_PAGE,
) -> KeyVersions | KeyValue:
    """The newest ``limit`` versions, oldest first; ``next_turn`` pages to older ones."""
    if present.damage is not None and turn is not None:
        return await read_key(thread_id, f"{key}/versions", present, history, turn)
    if f"{key}/versions" in present.tool_state and key not in present.tool_state:
        # A key whose last part is "versions" (a field named so): read it, as of the turn.
        return await read_key(thread_id, f"{key}/versions", present, history, turn)
    entry = _entry_of(present, key)
    now = present.turn
    if turn is not None and turn != now:
        answer = await resolve_turn(
            present.tool_state, key, turn, current_turn=now, history=history, thread_id=thread_id
        )
        if not isinstance(answer, Found):
            _answered(thread_id, key, turn, answer, present, versions=None)  # raises
            raise AssertionError("unreachable: _answered raises for every other answer")
        then = await entry_at(history, thread_id, key, turn)
        if is_entry(then):
            entry, now = then, turn
        else:  # the turn's checkpoints are gone; the key's ring still held its value
            rows = await resolve_versions(
                entry, key, current_turn=now, history=history, thread_id=thread_id
            )
            return _versions_page(
                thread_id, key, as_of(rows, turn), turn, versions=None, value=answer.value
            )
    rows = await resolve_versions(
        entry, key, current_turn=now, history=history, thread_id=thread_id, limit=limit
    )
    return _versions_page(
        thread_id,
        key,
        rows,
        turn,
        versions=entry["versions"],
        value=entry.get("value"),
    )


def _versions_page(
    thread_id: str,
    key: str,
    rows: list[VersionRow],
    turn: int | None,
    *,
    versions: int | None,
    value: Any,
) -> KeyVersions:
    unlisted = rows[0] if rows and rows[0].status == "unlisted" else None
    return KeyVersions(
        thread_id=thread_id,
        key=key,
        versions=sum(row.count for row in rows) if versions is None else versions,
        value=value,
        as_of_turn=turn,
        items=[VersionItem(**row.as_dict()) for row in rows],
        next_turn=unlisted.until if unlisted is not None else None,
    )


@router.get(
    "/{key:path}",
    responses={**PROBLEMS, 410: {"model": Problem, "description": "Turn no longer retained"}},
    summary="A key's value, now or at the end of a turn",
)
async def read_key(
    thread_id: str, key: str, present: Thread, history: History, turn: Turn = None
) -> KeyValue:
    if present.damage is not None and turn is not None:
        # The newest checkpoint cannot be read; an earlier turn may still be.
        past = await resolve_past(key, turn, history=history, thread_id=thread_id)
        return _answered(thread_id, key, turn, past, present, versions=None)
    entry = _entry_of(present, key)
    if turn is None:
        if "value" not in entry:
            raise ProblemError(410, "value_evicted", eviction_status(key, entry, flag="?turn="))
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
    return _answered(thread_id, key, turn, answer, present, versions=entry["versions"])


def _answered(
    thread_id: str,
    key: str,
    turn: int,
    answer: TurnAnswer,
    present: ThreadPresent,
    *,
    versions: int | None,
) -> KeyValue:
    if isinstance(answer, Found):
        return KeyValue(
            thread_id=thread_id,
            key=key,
            turn=turn,
            value=answer.value,
            since=answer.since,
            until=answer.until,
            source=answer.source,
            versions=versions,
        )
    result = outcome(answer)
    message = status_line(answer, keys=list(present.tool_state))
    raise ProblemError(result.status, result.code, message, **result.details)
