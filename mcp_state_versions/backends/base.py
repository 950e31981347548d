"""The contract between the readers and a saver: what the walk and retention ask of one.

:class:`Backend` is that contract, with defaults that go through any saver's public API (so
a saver the library does not know is still read right, only slower); :mod:`.memory`,
:mod:`.sqlite` and :mod:`.postgres` override what their storage does faster. Beside it, the
shape of a lineage row (:class:`Link` and its positions), the damage a chain can show
(:func:`parent_cycle`, :func:`missing_parent`), the listing's cursor (:func:`thread_cursor`),
what counts as a store that did not answer (:func:`unreachable`), and :func:`run_sync`, which
drives a backend built with ``sync=True`` from synchronous code.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Coroutine, Mapping, Sequence
from typing import Any, NamedTuple, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver

from ..state.reducer import TURN_METADATA_KEY
from ..storage.tool_state import NOTHING_STORED, Reducer, replay, stored_value
from .known import TOOL_STATE

T = TypeVar("T")


def storable(text: str) -> bool:
    """Whether any store can hold ``text``: PostgreSQL text cannot contain NUL, and every store
    wants valid UTF-8 (no lone surrogates). An id or a filter that fails this matches nothing,
    and asking a store about it would only fail."""
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class NeedsAsync(RuntimeError):
    """The saver only has an async API, and the caller is running synchronously."""


class Link(NamedTuple):
    """One checkpoint of a chain, without its values: the shape of a lineage row.

    A lineage is thousands of links, so backends return their database rows as they come,
    plain tuples in this field order, and nobody builds an object per row: the walk reads them
    by position (:data:`ID`, :data:`PARENT`, :data:`STAMP`, :data:`SOURCE`). This class names
    the fields and makes the single links a backend builds itself.

    ``stamp`` is the turn stamp as the storage returns it (an int, or its text where a database
    hands JSON values back as text; ``None`` when absent). Only the few links a search looks at
    are interpreted, by :func:`stamp_turn`. ``source`` is the metadata's ``source``, or
    :data:`UNREAD` where a backend defers reading metadata (:meth:`Backend.stamp`).
    """

    checkpoint_id: str
    parent_id: str | None
    stamp: Any
    source: str | None


ID, PARENT, STAMP, SOURCE, COUNTER = range(5)
"""Positions of a lineage row's fields (see :class:`Link`). ``COUNTER``, where a backend's rows
have it (a fifth field), is ``tool_state``'s delta counter in the checkpoint's metadata:
``None`` where LangGraph stored no counter, which is the only kind of checkpoint that can store
``tool_state`` whole (see :mod:`mcp_state_versions.storage.tool_state`)."""

LinkRow = tuple[Any, ...]
"""A lineage row: a :class:`Link` or a database row of the same shape."""

UNREAD: Any = "\x00unread"
"""The ``source`` of a link whose metadata a backend has not read yet."""


def stamp_turn(stamp: Any) -> int | None:
    """The turn a raw stamp names, or ``None`` when it names none (absent, not an integer).

    Accepts an int, or the decimal text of one (how PostgreSQL returns a JSON number as
    text): reading it as text lets the lineage query return every row without converting, or
    failing on, a stamp someone else wrote into metadata.
    """
    if type(stamp) is int:
        return stamp
    if isinstance(stamp, str) and 0 < len(stamp) <= 9 and stamp.isascii() and stamp.isdigit():
        return int(stamp)
    return None


class Backend:
    """What the walk and retention ask of a saver. Subclasses override what they do faster.

    ``lineage`` may return ``None`` (no cheap scan): the walk then follows parents with
    :meth:`parent_of`. The defaults go through the saver's public API.

    A lineage is cheapest to walk newest first: a thread that never forked is then its own
    chain, and the walk takes the rows as they are. Rows in any other order are sorted by id
    first, and a forked thread's parents are followed, so any order is still correct.
    """

    def __init__(
        self, saver: BaseCheckpointSaver, *, sync: bool = False, reducer: Reducer | None = None
    ) -> None:
        self.saver = saver
        self.sync = sync
        #: The graph's reducer, for rebuilding stored state; ``None``: the bounds it records.
        self.reducer = reducer

    async def lineage(self, thread_id: str, namespace: str) -> Sequence[LinkRow] | None:
        """Every checkpoint of the namespace, any branch, best newest first; ``None``: no scan."""
        return None

    async def stamp(self, thread_id: str, namespace: str, link: LinkRow) -> LinkRow:
        """``link`` with its metadata read (for backends whose lineage defers it)."""
        return link

    async def head(self, thread_id: str, namespace: str) -> str | None:
        """The newest checkpoint id of the namespace (the head of the current branch)."""
        found = await self._tuple(thread_id, namespace, None)
        return None if found is None else found.config["configurable"]["checkpoint_id"]

    async def link(
        self, thread_id: str, namespace: str, checkpoint_id: str | None = None
    ) -> Link | None:
        """The link of ``checkpoint_id`` (the head when ``None``): its parent, stamp, source."""
        if checkpoint_id is None:
            checkpoint_id = await self.head(thread_id, namespace)
            if checkpoint_id is None:
                return None
        return await self.parent_of(thread_id, namespace, checkpoint_id)

    async def run_start(self, thread_id: str, namespace: str) -> Link | None:
        """The head's link, read as a run is about to continue the head (``None``: no
        checkpoint yet).

        A backend whose saver remembers the ``tool_state`` history its run starts read
        (:func:`known_history`) may read that history in the same round trip and remember it,
        so the run's own read at its start is served from memory: one round trip where there
        were two. Either way, what the run rebuilds is the same."""
        return await self.link(thread_id, namespace)

    async def parent_of(self, thread_id: str, namespace: str, checkpoint_id: str) -> Link | None:
        """The link of ``checkpoint_id`` itself, with its parent (for savers without a scan)."""
        found = await self._tuple(thread_id, namespace, checkpoint_id)
        if found is None:
            return None
        parent = (found.parent_config or {}).get("configurable", {}).get("checkpoint_id")
        metadata = found.metadata or {}
        return Link(checkpoint_id, parent, metadata.get(TURN_METADATA_KEY), metadata.get("source"))

    async def tool_state(
        self, thread_id: str, namespace: str, checkpoint_id: str
    ) -> tuple[bool, Any]:
        """``(found, value)`` of the ``tool_state`` channel (``value`` ``None``: never written).

        A checkpoint that stores no value has it rebuilt from its ancestors' writes.
        """
        found, stored = await self.stored_tool_state(thread_id, namespace, checkpoint_id)
        if not found or stored is None:
            return found, None
        value = stored_value(stored)
        if value is NOTHING_STORED:
            value = await self.rebuild(thread_id, namespace, checkpoint_id)
        return True, value

    async def stored_tool_state(
        self, thread_id: str, namespace: str, checkpoint_id: str, channel: str = TOOL_STATE
    ) -> tuple[bool, Any]:
        """``(found, stored)``: what the checkpoint itself stores for ``tool_state`` (or
        another delta ``channel``: ``messages``).

        ``stored`` is ``None`` when the channel was never written, :data:`~mcp_state_versions.
        storage.NOTHING_STORED` when it is held as writes, else the stored value (a snapshot or
        a whole value).
        """
        found = await self._tuple(thread_id, namespace, checkpoint_id)
        if found is None:
            return False, None
        checkpoint = found.checkpoint
        if channel not in checkpoint.get("channel_versions", {}):
            return True, None
        return True, checkpoint.get("channel_values", {}).get(channel, NOTHING_STORED)

    async def rebuild(self, thread_id: str, namespace: str, checkpoint_id: str) -> Any:
        """``tool_state`` at a checkpoint that stores none: seed and writes along its parents."""
        history = await self._delta_history(thread_id, namespace, checkpoint_id)
        updates = [write[2] for write in history["writes"]]
        return replay(history.get("seed"), updates, self.reducer)

    async def rebuild_messages(self, thread_id: str, namespace: str, checkpoint_id: str) -> Any:
        """``messages`` at a checkpoint that stores none
        (:mod:`mcp_state_versions.storage.messages`): its seed and the writes along its parents,
        replayed."""
        from ..storage.messages import MESSAGES, replay_messages

        history = await self._delta_history(thread_id, namespace, checkpoint_id, MESSAGES)
        seed = stored_value(history.get("seed"))
        return replay_messages(
            [] if seed is NOTHING_STORED else list(seed), [w[2] for w in history["writes"]]
        )

    async def _delta_history(
        self, thread_id: str, namespace: str, checkpoint_id: str, channel: str = TOOL_STATE
    ) -> Any:
        """``channel``'s delta history at a checkpoint, for a rebuild or a seal: here the
        saver's own read; a backend with a read of its own overrides this."""
        return await self._stock_delta_history(thread_id, namespace, checkpoint_id, channel)

    async def _stock_delta_history(
        self, thread_id: str, namespace: str, checkpoint_id: str, channel: str = TOOL_STATE
    ) -> Any:
        """The saver's own ``get_delta_channel_history`` for ``channel``."""
        config: Any = {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": namespace,
                "checkpoint_id": checkpoint_id,
            }
        }
        if self.sync:
            try:
                found = self.saver.get_delta_channel_history(config=config, channels=[channel])
            except (NotImplementedError, asyncio.InvalidStateError):
                # an async-only saver, called from its own event loop's thread
                raise NeedsAsync(type(self.saver).__name__) from None
        else:
            found = await self.saver.aget_delta_channel_history(config=config, channels=[channel])
        return found[channel]

    async def writes_of(
        self, thread_id: str, namespace: str, checkpoint_ids: Sequence[str]
    ) -> dict[str, list[Any]]:
        """``tool_state``'s writes stored at each of ``checkpoint_ids``, each checkpoint's in
        the order its step applied them: what turns the state at a checkpoint into its
        child's. The walk uses them to carry a state it has rebuilt to a nearby checkpoint
        without a second replay from the snapshot, and keeps what it read, so probes around
        one turn read each checkpoint's writes once."""
        found: dict[str, list[Any]] = {}
        for checkpoint_id in checkpoint_ids:
            saved = await self._tuple(thread_id, namespace, checkpoint_id)
            writes = (saved.pending_writes or []) if saved is not None else []
            found[checkpoint_id] = [write[2] for write in writes if write[1] == TOOL_STATE]
        return found

    async def write_snapshot(
        self,
        thread_id: str,
        namespace: str,
        checkpoint_id: str,
        value: Any,
        channel: str = TOOL_STATE,
    ) -> None:
        """Store ``value`` as the checkpoint's own snapshot of ``channel``, so that it rebuilds
        without its ancestors (retention, before it deletes them)."""
        raise TypeError(
            f"cannot store a snapshot in {type(self.saver).__name__}; retention works on "
            "InMemorySaver, the SQLite savers and the PostgreSQL savers"
        )

    async def values(
        self, thread_id: str, namespace: str, checkpoint_id: str
    ) -> Mapping[str, Any] | None:
        """All channel values of a checkpoint (only for threads older than the clock), with
        ``messages`` rebuilt where the checkpoint holds it as writes or a snapshot (a thread
        older than the clock that the library's agent went on writing)."""
        from ..storage.messages import MESSAGES

        found = await self._tuple(thread_id, namespace, checkpoint_id)
        if found is None:
            return None
        values = found.checkpoint.get("channel_values", {})
        if MESSAGES not in found.checkpoint.get("channel_versions", {}):
            return values
        stored = stored_value(values.get(MESSAGES, NOTHING_STORED))
        if stored is NOTHING_STORED:
            stored = await self.rebuild_messages(thread_id, namespace, checkpoint_id)
        return {**values, MESSAGES: stored}

    async def checkpoint_ids(self, thread_id: str, namespace: str) -> list[str]:
        """Every checkpoint id of the namespace, on any branch."""
        links = await self.lineage(thread_id, namespace)
        if links is not None:
            return [link[ID] for link in links]
        config: RunnableConfig = {
            "configurable": {"thread_id": thread_id, "checkpoint_ns": namespace}
        }
        if self.sync:
            return [c.config["configurable"]["checkpoint_id"] for c in self.saver.list(config)]
        return [c.config["configurable"]["checkpoint_id"] async for c in self.saver.alist(config)]

    async def threads(self, after: str | None, limit: int) -> list[tuple[str, str]]:
        """Up to ``limit`` threads with ids after ``after`` (all, from the first, when
        ``None``), in id order, each with its root namespace's newest checkpoint id: a page
        of a sweep. The default lists every checkpoint through the saver's API."""
        newest: dict[str, str] = {}
        listed = self.saver.list(None) if self.sync else None
        if listed is not None:
            found = [c.config["configurable"] for c in listed]
        else:
            found = [c.config["configurable"] async for c in self.saver.alist(None)]
        for configurable in found:
            thread, checkpoint = str(configurable["thread_id"]), configurable["checkpoint_id"]
            if configurable.get("checkpoint_ns", "") == "" and (after is None or thread > after):
                newest[thread] = max(newest.get(thread, checkpoint), checkpoint)
        return sorted(newest.items())[:limit]

    async def recent_threads(
        self, before: str | None, limit: int, contains: str | None = None
    ) -> list[tuple[str, str]]:
        """Up to ``limit`` threads whose id contains ``contains`` (any, when ``None``), newest
        first by their root namespace's newest checkpoint (then by id, descending: copies of
        a thread share their newest checkpoint's id), each with that checkpoint's id,
        starting after ``before`` (a :func:`thread_cursor`). The default lists every thread
        through :meth:`threads`."""
        found: list[tuple[str, str]] = []
        after: str | None = None
        while page := await self.threads(after, 1000):
            found.extend(page)
            after = page[-1][0]
        return _recent(found, before, limit, contains)

    async def stored_bytes(
        self, thread_id: str, namespace: str | None, checkpoint_ids: Sequence[str] | None
    ) -> int:
        """About the bytes storage holds for ``checkpoint_ids`` of a namespace (``None``: all
        of them; ``namespace=None``: the whole thread): their rows, their writes, and values
        no other checkpoint shares. What a prune or a sweep reports it removed. ``0`` where a
        saver's storage is not known."""
        return 0

    async def threads_stored_bytes(self, thread_ids: Sequence[str]) -> dict[str, int]:
        """:meth:`stored_bytes` of each whole thread of ``thread_ids``; the database backends
        read them in one statement, for a page of a listing."""
        return {thread: await self.stored_bytes(thread, None, None) for thread in thread_ids}

    async def delete_thread(self, thread_id: str) -> None:
        """Delete a whole thread, every namespace, through the saver's own API."""
        if self.sync:
            self.saver.delete_thread(thread_id)
        else:
            await self.saver.adelete_thread(thread_id)

    async def written_at(self, thread_id: str, checkpoint_id: str) -> tuple[float | None, ...]:
        """``(when the store committed the checkpoint, the store's time now)``, Unix seconds
        by the store's own clock, each ``None`` where the store keeps no such time. A
        sweep's idea of a thread's age: a writer's clock (in its checkpoint ids) may be days
        off; the store's is one clock for every writer."""
        return None, None

    async def delete_idle_thread(self, thread_id: str, head: str) -> bool:
        """Delete a whole thread if ``head`` is still its newest checkpoint (root namespace),
        the check and the delete as one step: a run that stored a checkpoint after the thread
        was found idle keeps it. ``False`` when the thread was written to, and stays.

        The database backends hold the writers off between the two (SQLite's write lock, a
        PostgreSQL table lock for the transaction's few statements). Here, for a saver known
        only by its API, nothing can, and the two are as close as its API allows."""
        if await self.head(thread_id, "") != head:
            return False
        await self.delete_thread(thread_id)
        return True

    async def delete(self, thread_id: str, namespace: str, checkpoint_ids: Sequence[str]) -> None:
        """Delete checkpoints with their writes, and blobs no remaining checkpoint uses."""
        raise TypeError(
            f"cannot delete single checkpoints from {type(self.saver).__name__}; retention "
            "works on InMemorySaver, the SQLite savers and the PostgreSQL savers (see "
            "mcp_state_versions.savers.specs)"
        )

    async def delete_writes(
        self, thread_id: str, namespace: str, checkpoint_id: str, task_ids: Sequence[str]
    ) -> None:
        """Delete the writes ``task_ids`` stored on one checkpoint (a run's own, taken back
        when it is refused: :mod:`mcp_state_versions.savers.resumes`)."""
        raise TypeError(f"cannot delete single writes from {type(self.saver).__name__}")

    async def _tuple(self, thread_id: str, namespace: str, checkpoint_id: str | None) -> Any:
        configurable: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": namespace}
        if checkpoint_id is not None:
            configurable["checkpoint_id"] = checkpoint_id
        config = {"configurable": configurable}
        if self.sync:
            try:
                return self.saver.get_tuple(config)  # type: ignore[arg-type]
            except NotImplementedError:
                raise NeedsAsync(type(self.saver).__name__) from None
        return await self.saver.aget_tuple(config)  # type: ignore[arg-type]


def thread_cursor(thread_id: str, head: str) -> str:
    """Where a listing newest first goes on after ``thread_id``, whose newest checkpoint is
    ``head``: the head, then the thread id, so that threads sharing a head (a thread copied
    under another id keeps its checkpoint ids) are each listed once. A cursor of the head
    alone goes on after every thread with that head."""
    return f"{head} {thread_id}"


def _cursor_parts(before: str | None) -> tuple[str, str]:
    """A :func:`thread_cursor`'s head and thread id (``''`` for none). Checkpoint ids hold no
    space; thread ids may."""
    head, _, thread = (before or "").partition(" ")
    return head, thread


def _recent(
    threads: Sequence[tuple[str, str]], before: str | None, limit: int, contains: str | None
) -> list[tuple[str, str]]:
    """:meth:`Backend.recent_threads` over a list of ``(thread, head)``."""
    after = _cursor_parts(before)
    chosen = [
        (thread, head)
        for thread, head in threads
        if (contains is None or contains in thread) and (before is None or (head, thread) < after)
    ]
    return sorted(chosen, key=lambda row: (row[1], row[0]), reverse=True)[:limit]


DELTA_SNAPSHOT_STEPS = int(os.environ.get("LANGGRAPH_DELTA_MAX_SUPERSTEPS_SINCE_SNAPSHOT", "5000"))
"""The most steps LangGraph lets a delta channel go without a snapshot: its own setting
(``LANGGRAPH_DELTA_MAX_SUPERSTEPS_SINCE_SNAPSHOT``, default 5,000), read as LangGraph reads
it, when this module is first imported."""

MAX_CHAIN = max(50_000, 10 * DELTA_SNAPSHOT_STEPS)
"""The most parent links any read follows: ten times :data:`DELTA_SNAPSHOT_STEPS`, and no
fewer than 50,000. LangGraph snapshots every delta channel at least that often, so a delta
history is shorter than this, and a chain of that many links without a value is a cycle in
the parent links or a thread damaged some other way: reported as damage
(:func:`parent_cycle`), never followed for ever (on SQLite a cyclic walk held the database
connection, and every thread's reads, until a restart)."""


def parent_cycle(thread_id: str, checkpoint_id: str) -> Exception:
    """The error for parent links that loop back (or run on past :data:`MAX_CHAIN`)."""
    from ..walk.history import DamagedState

    return DamagedState(
        thread_id,
        None,
        f"the parent links of its checkpoints form a cycle, or a chain longer than "
        f"{MAX_CHAIN:,} links, at checkpoint {checkpoint_id}",
    )


def missing_parent(thread_id: str, checkpoint_id: str, parent: str) -> Exception:
    """The error for a checkpoint held as writes whose parent is not in its thread (a parent
    link pointing into another thread, a row deleted by hand): its ``tool_state`` is rebuilt
    from writes back to a snapshot it cannot reach, and would read as keys never set."""
    from ..walk.history import DamagedState

    return DamagedState(
        thread_id,
        None,
        f"checkpoint {checkpoint_id} holds tool_state as writes since a snapshot, but its "
        f"parent {parent} is not in this thread, so its value cannot be rebuilt",
    )


_REFUSED = {("psycopg", "InsufficientPrivilege"), ("psycopg", "ReadOnlySqlTransaction")}
"""Errors that say a PostgreSQL server answered, but will not let this role read or write what
it asked (a role without the grant, a read-only server or transaction)."""

_UNREACHABLE = {
    ("psycopg", "OperationalError"),
    ("psycopg", "InterfaceError"),
    ("psycopg_pool", "PoolTimeout"),
    ("psycopg_pool", "PoolClosed"),
} | _REFUSED
"""Errors that say a PostgreSQL server did not answer, or refused (:data:`_REFUSED`): named, not
imported, as the extra may be absent."""

_SQLITE_BUSY = ("locked", "busy", "unable to open", "disk i/o", "readonly", "read-only", "is full")


def unreachable(error: BaseException) -> bool:
    """Whether ``error`` says the store did not answer or cannot be written (try again later,
    or fix access), as opposed to saying what it holds is wrong.

    A PostgreSQL connection or pool failure or a refused privilege, an OS-level error, a
    timeout, or SQLite saying the file is locked, cannot be opened, or is read-only.
    """
    if isinstance(error, (OSError, TimeoutError)) or _named_in(error, _UNREACHABLE):
        return True
    if type(error).__module__ == "sqlite3" and type(error).__name__ == "OperationalError":
        return any(word in str(error).lower() for word in _SQLITE_BUSY)
    return False


def refused(error: BaseException) -> bool:
    """Whether ``error`` (one :func:`unreachable` names) says the store answered, but will not
    let this role do what it asked: a grant is missing, or the server or transaction is
    read-only. Waiting will not help; access will."""
    return _named_in(error, _REFUSED)


def _named_in(error: BaseException, names: set[tuple[str, str]]) -> bool:
    """Whether ``error``'s class, or a class it derives from, is one of ``names`` (the top
    package and the class name: the drivers' modules are not imported to compare)."""
    return any((cls.__module__.split(".")[0], cls.__name__) in names for cls in type(error).__mro__)


def run_sync(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that never suspends (a walk over a ``sync=True`` backend) to its end.

    Raises :class:`NeedsAsync` if it does suspend: something in it needs an event loop.
    """
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value
    finally:
        coroutine.close()
    raise NeedsAsync("the read awaited something that needs an event loop")


_UUID_EPOCH = 0x01B21DD213814000
"""100-ns intervals between the UUID epoch (1582-10-15) and the Unix epoch."""


def checkpoint_time(checkpoint_id: str) -> float | None:
    """When a checkpoint was made (Unix seconds), from its version-6 UUID id; ``None`` when the
    id is not one."""
    try:
        value = uuid.UUID(checkpoint_id)
    except ValueError:
        return None
    if value.version != 6:
        return None
    stamp = ((value.int >> 80) << 12) | ((value.int >> 64) & 0x0FFF)
    return (stamp - _UUID_EPOCH) / 10_000_000
