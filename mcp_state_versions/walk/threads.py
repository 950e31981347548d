"""Finding threads: a saver's threads, newest first, with their turns, last write and size.

Every other reader starts from a thread id, and a person looking into a deployment often has
none to start from. :func:`list_threads` pages through a saver's threads by the time of their
newest checkpoint, so the command line's ``threads`` and the HTTP API's ``GET /threads``
answer "what is in here, and what changed last" with the same figures.

A page costs two statements on SQLite and PostgreSQL once its threads' turn counts are known:
the threads with their newest checkpoints, and their sizes. A thread's turn count is a pure
function of its newest checkpoint (the clock in the state it holds, built from the checkpoints
below it, which never change), so a saver remembers the count of each thread it listed, keyed
by thread and newest checkpoint (:data:`TURN_COUNTS`): a thread is read again only when a new
checkpoint made it another. A listing polled by many clients then costs what its page costs,
not a read of each thread's history.
"""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from ..backends import backend_for, checkpoint_time, storable, thread_cursor, unreachable
from .checkpoints import CheckpointHistory, reading
from .history import DamagedState

__all__ = ["TURN_COUNTS", "ThreadPage", "ThreadSummary", "list_threads"]

TURN_COUNTS = 4096
"""Threads whose turn count a saver's listings remember, keyed by thread and newest checkpoint,
the least recently listed giving way first. A cache of a pure function: a key's count never
changes (a prune keeps a thread's count, and a new turn is a new newest checkpoint). A thread
found damaged is not remembered, so it is read again at every listing."""

_TURN_COUNTS = "_mcp_state_versions_turn_counts"
_TURN_COUNTS_LOCK = threading.Lock()
_COUNTING = "_mcp_state_versions_turn_counts_read"
"""The counts being read, by event loop, thread and newest checkpoint: one read for all."""


def _turn_counts(saver: BaseCheckpointSaver) -> OrderedDict[tuple[str, str], int]:
    with _TURN_COUNTS_LOCK:
        return saver.__dict__.setdefault(_TURN_COUNTS, OrderedDict())


async def _turn_count(saver: BaseCheckpointSaver, thread_id: str, head: str) -> int:
    """The thread's turn count at its checkpoint ``head``, remembered (see
    :data:`TURN_COUNTS`); raises :class:`~mcp_state_versions.walk.history.DamagedState`.

    Listings that ask at once for a count not known yet share one read: under many clients a
    new newest checkpoint (each turn makes one) was otherwise read by every one of them. A
    listing cancelled while it reads (its request's deadline) leaves the others to read it
    themselves, never cancelled in its place."""
    counts = _turn_counts(saver)
    key = (thread_id, head)
    with _TURN_COUNTS_LOCK:
        if key in counts:
            counts.move_to_end(key)
            return counts[key]
    reads: dict[Any, asyncio.Future[int]] = saver.__dict__.setdefault(_COUNTING, {})
    loop = asyncio.get_running_loop()
    shared = reads.get((loop, *key))
    if shared is not None:
        try:
            return await asyncio.shield(shared)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is None or task.cancelling():
                raise  # this listing was cancelled
            # the listing reading it was cancelled (its request's deadline): read it here
            return await _turn_count(saver, thread_id, head)
    reads[(loop, *key)] = shared = loop.create_future()
    try:
        total = (await CheckpointHistory(saver, checkpoint_id=head).turns(thread_id)).total
    except asyncio.CancelledError:
        shared.cancel()
        raise
    except BaseException as error:
        shared.set_exception(error)
        shared.exception()  # read here: a read no other listing waited for is not an error
        raise
    finally:
        reads.pop((loop, *key), None)
    shared.set_result(total)
    with _TURN_COUNTS_LOCK:
        counts[key] = total
        while len(counts) > TURN_COUNTS:
            counts.popitem(last=False)
    return total


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
    listed = rows[:limit]
    damages: dict[str, str] = {}
    try:
        sizes = await backend.threads_stored_bytes([thread_id for thread_id, _ in listed])
    except Exception as error:  # a damaged page under some thread's rows: read each on its own
        if unreachable(error):
            raise  # a store that does not answer is not asked again thread by thread
        sizes = {}
        for thread_id, _ in listed:
            try:
                with reading(thread_id):
                    sizes[thread_id] = await backend.stored_bytes(thread_id, None, None)
            except DamagedState as damaged:
                damages[thread_id] = damaged.detail
    found = []
    for thread_id, head in listed:
        made = checkpoint_time(head)
        turns: int | None = None
        damage = None
        try:
            turns = await _turn_count(saver, thread_id, head)
        except DamagedState as damaged:
            damage = damaged.detail
        found.append(
            ThreadSummary(
                thread_id=thread_id,
                turns=turns,
                last_write=None if made is None else datetime.fromtimestamp(made, UTC),
                stored_bytes=sizes.get(thread_id, 0),
                damage=damage or damages.get(thread_id),
                cursor=thread_cursor(thread_id, head),
            )
        )
    more = len(rows) > limit
    return ThreadPage(tuple(found), found[-1].cursor if more else None)
