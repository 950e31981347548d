"""Finding threads: a saver's threads, newest first, with their turns, last write and size.

Every other reader starts from a thread id, and a person looking into a deployment often has
none to start from. :func:`list_threads` pages through a saver's threads by the time of their
newest checkpoint (one query per page on SQLite and PostgreSQL), so the command line's
``threads`` and the HTTP API's ``GET /threads`` answer "what is in here, and what changed
last" with the same figures.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from langgraph.checkpoint.base import BaseCheckpointSaver

from .backends import backend_for, storable
from .checkpoint_walk import CheckpointHistory, reading
from .history import DamagedState
from .sweep import checkpoint_time

__all__ = ["ThreadPage", "ThreadSummary", "list_threads"]


@dataclass(frozen=True, slots=True)
class ThreadSummary:
    """One thread: how many turns it has had, when it was last written (``None`` when its
    checkpoint ids carry no time), and about the bytes storage holds for it. A thread whose
    stored state cannot be read has ``turns`` ``None`` and ``damage`` saying why: one damaged
    thread is listed as such, never failing the listing of the others."""

    thread_id: str
    turns: int | None
    last_write: datetime | None
    stored_bytes: int
    damage: str | None = None
    cursor: str = ""
    """Where a listing that ends with this thread goes on from (``list_threads(before=...)``)."""


@dataclass(frozen=True, slots=True)
class ThreadPage:
    """A page of threads, newest first; ``next`` is the cursor for the page after it
    (``list_threads(before=...)``), ``None`` on the last page."""

    threads: tuple[ThreadSummary, ...]
    next: str | None


async def list_threads(
    saver: BaseCheckpointSaver,
    *,
    limit: int = 50,
    before: str | None = None,
    contains: str | None = None,
) -> ThreadPage:
    """The threads of ``saver`` whose id contains ``contains``, newest first, ``limit`` at a
    time, from the cursor ``before`` (a page's ``next``) on. Text no store can hold (a NUL
    byte, a lone surrogate) matches no thread: the page is empty."""
    if limit < 1:
        raise ValueError(f"limit must be at least 1, got {limit}")
    if not all(storable(text) for text in (before or "", contains or "")):
        return ThreadPage((), None)  # no thread id, and no cursor, holds such text
    backend = backend_for(saver)
    rows = await backend.recent_threads(before, limit + 1, contains or None)
    history = CheckpointHistory(saver)
    found = []
    for thread_id, head in rows[:limit]:
        made = checkpoint_time(head)
        turns: int | None = None
        damage = None
        size = 0
        try:
            turns = (await history.turns(thread_id)).total
        except DamagedState as damaged:
            damage = damaged.detail
        try:
            with reading(thread_id):  # a damaged page under this thread's rows: its damage
                size = await backend.stored_bytes(thread_id, None, None)
        except DamagedState as damaged:
            damage = damage or damaged.detail
        found.append(
            ThreadSummary(
                thread_id=thread_id,
                turns=turns,
                last_write=None if made is None else datetime.fromtimestamp(made, UTC),
                stored_bytes=size,
                damage=damage,
                cursor=head,
            )
        )
    more = len(rows) > limit
    return ThreadPage(tuple(found), rows[limit - 1][1] if more else None)
