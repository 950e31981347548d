"""Retention: removing checkpoint history a deployment no longer wants to keep.

LangGraph defines ``aprune(thread_ids, strategy="keep_latest" | "delete")`` on every saver, but
the open-source in-memory and SQLite savers leave it unimplemented. :class:`PruningInMemorySaver`
and :class:`PruningSqliteSaver` are those savers with ``aprune`` implemented and nothing else
changed; the PostgreSQL saver implements it itself. All three are checked by LangGraph's own
conformance suite in this project's tests.

On top of that, :func:`prune_thread` prunes *by turn*, which is what a conversation's retention
policy is written in: keep the last N turns of the thread's current branch, and optionally drop
branches a fork abandoned. The thread stays resumable (its head is always kept), and readers
keep telling the truth: a turn read of a removed turn answers "no longer retained", unless the
key's own ring still holds that version, in which case it answers it.

``tool_state`` is stored as writes with periodic snapshots (:mod:`mcp_state_versions.storage`),
so a checkpoint's value is rebuilt from the nearest snapshot before it and the writes after. A
naive keep-latest would leave the kept checkpoint nothing to rebuild from, and its state would
read back empty. Every prune here first makes the oldest checkpoint it keeps rebuildable on its
own: where it stores no value, the value is rebuilt while its ancestors still exist and stored
in it as a snapshot (:func:`seal`). Only then are the ancestors deleted.
"""

from __future__ import annotations

import select
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any, Literal

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from .backends import ID, PARENT, TOOL_STATE, Backend, backend_for, run_sync
from .backends.known import (
    MESSAGES,
    caught_up,
    forget_histories,
    note_checkpoint,
    note_writes,
    remember_history,
)
from .backends.memory import MemoryBackend, delete_checkpoints, forget
from .backends.resumes import check_resume, check_resume_sync, note_start
from .backends.sqlite import SqliteBackend
from .backends.stamps import note_stamp, settle
from .clock import turn_at
from .credentials import SECRET_NAMES
from .history import StoreUnavailable
from .messages import storable_writes
from .state import refuse_secret_writes
from .storage import NOTHING_STORED

if TYPE_CHECKING:
    from .backends.postgres import PostgresBackend

__all__ = [
    "PruneResult",
    "PruningInMemorySaver",
    "PruningSqliteSaver",
    "open_postgres_saver",
    "prune_thread",
    "seal",
]

Strategy = Literal["keep_latest", "delete"]


def _check_strategy(strategy: str) -> None:
    if strategy not in ("keep_latest", "delete"):
        raise ValueError(f"unknown prune strategy {strategy!r}; use 'keep_latest' or 'delete'")


def _where(config: Any) -> tuple[str, str, str | None]:
    """``(thread id, namespace, checkpoint id)`` a saver call's config names (the id ``None``
    where it names none: the head; for a put, the new checkpoint's parent)."""
    configurable = config["configurable"]
    return (
        str(configurable["thread_id"]),
        configurable.get("checkpoint_ns", ""),
        configurable.get("checkpoint_id"),
    )


class PruningInMemorySaver(InMemorySaver):
    """``InMemorySaver`` with ``aprune``/``prune`` implemented, and a delta history of
    ``tool_state`` that decodes each checkpoint once, not at every run start.

    LangGraph rebuilds ``tool_state`` at every run start from its delta history; the stock
    saver decodes each checkpoint back to the last snapshot to learn its ``tool_state``
    version, which on a thread far past its snapshot cost more than the rest of the library's
    work in a turn. This one decodes each checkpoint's version once and walks the parents by
    dict lookups, stopping where the stock read does
    (:meth:`~mcp_state_versions.backends.memory.MemoryBackend.delta_history`).
    """

    remembers_run_starts = True
    """Its run starts remember the history they read (see
    :func:`~mcp_state_versions.backends.remembers_run_starts`)."""

    def get_delta_channel_history(
        self, *, config: Any, channels: Sequence[str]
    ) -> Mapping[str, Any]:
        thread_id, namespace, checkpoint_id = _where(config)
        ours = [TOOL_STATE, MESSAGES] if checkpoint_id else [TOOL_STATE]
        if not any(channel in ours for channel in channels):
            return super().get_delta_channel_history(config=config, channels=channels)
        rest = [channel for channel in channels if channel not in ours]
        found: dict[str, Any] = dict(
            super().get_delta_channel_history(config=config, channels=rest)
        )
        if TOOL_STATE in channels:
            found[TOOL_STATE] = MemoryBackend(self).delta_history(
                thread_id, namespace, checkpoint_id, remember=True
            )
        if MESSAGES in ours and MESSAGES in channels:
            found[MESSAGES] = run_sync(remembered_messages(self, self._stock_history, config))
        return found

    async def _stock_history(self, *, config: Any, channels: Sequence[str]) -> Mapping[str, Any]:
        return super().get_delta_channel_history(config=config, channels=channels)

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        thread_id, namespace, parent = _where(config)
        note_checkpoint(self, thread_id, namespace, checkpoint["id"], parent, metadata)
        return super().put(config, checkpoint, metadata, new_versions)

    def get_tuple(self, config: Any) -> Any:
        found = super().get_tuple(config)
        note_start(self, found)  # a resume reads the paused checkpoint through here
        return found

    secret_names: str | None = SECRET_NAMES
    """Fields named like these are never stored in ``tool_state``: a write holding one is
    refused (:func:`~mcp_state_versions.state.refuse_secret_writes`); ``None`` stores all."""

    def put_writes(
        self, config: Any, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        writes = _storable(self, writes)
        super().put_writes(config, writes, task_id, task_path)
        check_resume_sync(self, config, writes, task_id)
        note_writes(self, *_where(config), writes, task_id, task_path)  # type: ignore[arg-type]

    async def aget_delta_channel_history(
        self, *, config: Any, channels: Sequence[str]
    ) -> Mapping[str, Any]:
        return self.get_delta_channel_history(config=config, channels=channels)

    def delete_thread(self, thread_id: str) -> None:
        super().delete_thread(thread_id)
        forget(self, thread_id)

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        _check_strategy(strategy)
        for thread_id in thread_ids:
            if strategy == "delete":
                self.delete_thread(thread_id)
                continue
            backend = backend_for(self, sync=True)
            for namespace, stored in list(self.storage.get(thread_id, {}).items()):
                if stored:
                    latest = max(stored)
                    run_sync(seal(backend, thread_id, namespace, latest))
                    delete_checkpoints(
                        self, thread_id, namespace, [i for i in stored if i != latest]
                    )

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        self.prune(thread_ids, strategy=strategy)


def _storable(saver: Any, writes: Sequence[tuple[str, Any]]) -> Sequence[tuple[str, Any]]:
    """``writes`` as the library's savers store them: writes of ``tool_state`` holding a
    credential refused before anything is stored, and ``messages`` writes in a form the
    serializer keeps (:func:`~mcp_state_versions.messages.storable_writes`)."""
    for channel, value in writes:
        if channel == TOOL_STATE:
            refuse_secret_writes(value, saver.secret_names)
    return storable_writes(writes)


class _NotesWhatItStores:
    """For a database saver: tells :mod:`mcp_state_versions.backends.known` each checkpoint
    it puts (before storing it) and each write it stored, so that a run start continuing what
    this process wrote rebuilds ``tool_state`` with no read of its writes
    (:func:`~mcp_state_versions.backends.known.caught_up`). A checkpoint that fails to store
    forgets the thread's remembered history: what was noted no longer matches storage.

    It also notes the turn stamp of each checkpoint it reads or puts, and settles the stamp
    :func:`~mcp_state_versions.agent.run_turn` leaves to it from the parent's
    (:mod:`mcp_state_versions.backends.stamps`)."""

    serde: Any

    stamps_at_put = True
    """It settles the turn stamp :func:`~mcp_state_versions.agent.run_turn` leaves to it
    (:mod:`mcp_state_versions.backends.stamps`)."""

    async def aget_tuple(self, config: Any) -> Any:
        found = await super().aget_tuple(config)  # type: ignore[misc]
        note_start(self, found)  # a resume reads the paused checkpoint through here
        if found is not None:  # what a run continues: its stamp settles the run's
            configurable = found.config["configurable"]
            note_stamp(
                self,
                str(configurable["thread_id"]),
                configurable.get("checkpoint_ns", ""),
                configurable["checkpoint_id"],
                found.metadata,
            )
        return found

    async def aput(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        config, metadata = settle(self, config, metadata)
        thread_id, namespace, parent = _where(config)
        note_stamp(self, thread_id, namespace, checkpoint["id"], metadata)
        note_checkpoint(self, thread_id, namespace, checkpoint["id"], parent, metadata)
        try:
            return await super().aput(config, checkpoint, metadata, new_versions)  # type: ignore[misc]
        except BaseException:
            forget_histories(self, thread_id)
            raise

    secret_names: str | None = SECRET_NAMES
    """Fields named like these are never stored in ``tool_state``: a write holding one is
    refused (:func:`~mcp_state_versions.state.refuse_secret_writes`); ``None`` stores all."""

    async def aput_writes(
        self, config: Any, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        writes = _storable(self, writes)
        await super().aput_writes(config, writes, task_id, task_path)  # type: ignore[misc]
        await check_resume(self, config, writes, task_id)
        # (an SQLite file from before task paths stores none, and a read sorts by "")
        stored_path = task_path if getattr(self, "_has_task_path", True) else ""
        note_writes(self, *_where(config), writes, task_id, stored_path)  # type: ignore[arg-type]


class PruningSqliteSaver(_NotesWhatItStores, AsyncSqliteSaver):
    """``AsyncSqliteSaver`` with ``aprune`` implemented (SQLite keeps no separate blobs), and a
    delta history of ``tool_state`` that reads only what it needs.

    LangGraph rebuilds ``tool_state`` at every run start from its delta history; the stock
    saver decodes each checkpoint back to the last snapshot, every message included, which on a
    long thread costs more than the turn. This one reads the chain from an index and decodes
    one checkpoint (:meth:`~mcp_state_versions.backends.sqlite.SqliteBackend.delta_history`).

    It is asynchronous, as ``AsyncSqliteSaver`` is: open it with ``from_conn_string(path)``
    inside async code, and run graphs on it with ``ainvoke``/``astream``. A sync app keeps
    LangGraph's ``SqliteSaver``; every read of the library works on it (by the walk).
    """

    remembers_run_starts = True
    """Its run starts remember the history they read (see
    :func:`~mcp_state_versions.backends.remembers_run_starts`)."""

    def __init__(self, conn: Any, *args: Any, **kwargs: Any) -> None:
        import sqlite3

        if isinstance(conn, sqlite3.Connection):
            raise TypeError(
                "PruningSqliteSaver is asynchronous and takes an aiosqlite connection, not a "
                "sqlite3 one: open it with `async with PruningSqliteSaver.from_conn_string("
                "path) as saver` in async code, or use LangGraph's SqliteSaver in a sync app"
            )
        super().__init__(conn, *args, **kwargs)

    async def aget_delta_channel_history(
        self, *, config: Any, channels: Sequence[str]
    ) -> Mapping[str, Any]:
        backend = SqliteBackend(self, sync=False, native_sync=False)
        if not await backend._indexed():  # a file opened read-only, which no writer indexed
            return await super().aget_delta_channel_history(config=config, channels=channels)
        return await delta_histories(super().aget_delta_channel_history, backend, config, channels)

    async def setup(self) -> None:
        """The saver's tables, and the lineage index its readers walk by (a writer makes it;
        see :mod:`mcp_state_versions.backends.sqlite`)."""
        if self.is_setup:
            return
        await super().setup()
        await SqliteBackend(self, sync=False, native_sync=False).create_index()

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        _check_strategy(strategy)
        await self.setup()
        for thread_id in thread_ids:
            if strategy == "delete":
                await self.adelete_thread(thread_id)
                continue
            backend = SqliteBackend(self, sync=False, native_sync=False)
            for namespace, latest in await backend.latest_per_namespace(thread_id):
                await seal(backend, thread_id, namespace, latest)
            await backend.keep_latest(thread_id)


async def delta_histories(
    stock: Callable[..., Awaitable[Mapping[str, Any]]],
    backend: SqliteBackend | PostgresBackend,
    config: Any,
    channels: Sequence[str],
) -> Mapping[str, Any]:
    """A database saver's ``aget_delta_channel_history``: ``tool_state``'s and ``messages``'
    read by ``backend`` (its ``delta_history``: extended from what this process remembers, or
    else one statement, and remembered as the run start's it is), any other channel's by the
    saver's own read (``stock``), which also answers a config naming no checkpoint. The
    saver's own read of ``messages`` walked the chain a checkpoint at a time, decoding each:
    after a restart, the first run start of a long thread read several times what a plain
    agent's read of its head does."""
    thread_id, namespace, checkpoint_id = _where(config)
    if not checkpoint_id or not (TOOL_STATE in channels or MESSAGES in channels):
        return await stock(config=config, channels=channels)
    rest = [channel for channel in channels if channel not in (TOOL_STATE, MESSAGES)]
    found = dict(await stock(config=config, channels=rest)) if rest else {}
    if TOOL_STATE in channels:
        found[TOOL_STATE] = await backend.delta_history(
            thread_id, namespace, checkpoint_id, remember=True
        )
    if MESSAGES in channels:
        found[MESSAGES] = await backend.delta_history(
            thread_id, namespace, checkpoint_id, remember=True, channel=MESSAGES
        )
    return found


async def remembered_messages(
    saver: Any, stock: Callable[..., Awaitable[Mapping[str, Any]]], config: Any
) -> Any:
    """``messages``' delta history at the checkpoint ``config`` names: extended from the one
    this process remembers by what its saver noted storing since
    (:func:`~mcp_state_versions.backends.known.caught_up`), or else read by the saver's own
    walk (``stock``) and remembered. A running service thus reads a thread's messages from
    storage once a snapshot cycle, not at every run start."""
    thread_id, namespace, checkpoint_id = _where(config)
    known = caught_up(saver, thread_id, namespace, checkpoint_id, channel=MESSAGES)
    if known is not None:
        return known.copied()
    history = (await stock(config=config, channels=[MESSAGES]))[MESSAGES]
    if checkpoint_id is not None:  # (callers read a named checkpoint's, never the head's)
        size = sum(_message_bytes(write[2]) for write in history["writes"])
        remember_history(
            saver, thread_id, namespace, checkpoint_id, history, size, channel=MESSAGES
        )
    return history


def _message_bytes(write: Any) -> int:
    """About what a stored ``messages`` write takes (its text, and a few hundred bytes a
    message for the rest): what a remembered history is bounded by."""
    items = write if isinstance(write, list) else [write]
    return sum(len(str(getattr(m, "content", m))) + 256 for m in items)


async def seal(backend: Backend, thread_id: str, namespace: str, checkpoint_id: str) -> None:
    """Make ``checkpoint_id`` rebuild its ``tool_state`` without its ancestors.

    Called before a prune deletes the ancestors: where the checkpoint stores no value (it is
    held as writes since the last snapshot), the value is rebuilt now and stored in it as a
    snapshot. A checkpoint that stores one already, or never had ``tool_state``, is left as is.
    """
    found, stored = await backend.stored_tool_state(thread_id, namespace, checkpoint_id)
    if found and stored is NOTHING_STORED:
        value = await backend.rebuild(thread_id, namespace, checkpoint_id)
        await backend.write_snapshot(thread_id, namespace, checkpoint_id, value)
    # messages stored as writes too (the default): a kept checkpoint with no snapshot of its
    # own would read back an empty conversation once its ancestors are gone
    found, stored = await backend.stored_tool_state(
        thread_id, namespace, checkpoint_id, channel=MESSAGES
    )
    if found and stored is NOTHING_STORED:
        value = await backend.rebuild_messages(thread_id, namespace, checkpoint_id)
        await backend.write_snapshot(thread_id, namespace, checkpoint_id, value, channel=MESSAGES)


POOL_TIMEOUT_S = 10.0
"""How long a PostgreSQL query waits for a pooled connection before it fails."""

RECONNECT_S = 1.0
"""How long the pool keeps trying to replace a lost connection before leaving it to the next
query."""


@cache
def _postgres_saver_class() -> Any:
    """``AsyncPostgresSaver`` with a delta history of ``tool_state`` read in one statement
    (:meth:`~mcp_state_versions.backends.postgres.PostgresBackend.delta_history`); made when
    first asked for, as the ``postgres`` extra may be absent."""
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    from .backends.postgres import PostgresBackend

    class DeltaReadingPostgresSaver(_NotesWhatItStores, AsyncPostgresSaver):
        """``AsyncPostgresSaver`` whose run starts read ``tool_state``'s delta history in one
        round trip, not two, and never by a prepared lookup of a list of checkpoints."""

        remembers_run_starts = True
        """Its run starts remember the history they read (see
        :func:`~mcp_state_versions.backends.remembers_run_starts`)."""

        async def aget_delta_channel_history(
            self, *, config: Any, channels: Sequence[str]
        ) -> Mapping[str, Any]:
            backend = PostgresBackend(self, sync=False, native_sync=False)
            stock = super().aget_delta_channel_history
            return await delta_histories(stock, backend, config, channels)

        async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
            """LangGraph's ``aprune``, with ``keep_latest`` for threads the library stores as
            writes: each namespace's head is sealed first (its ``tool_state`` and ``messages``
            stored whole in it), then LangGraph's own ``keep_latest`` statements delete the
            rest, in one transaction a thread, refusing (as LangGraph does) a thread with
            another ``DeltaChannel`` whose head still needs its ancestors."""
            if strategy != "keep_latest" or isinstance(thread_ids, str):
                await super().aprune(thread_ids, strategy=strategy)
                return
            for thread_id in [str(t) for t in thread_ids]:
                await _keep_latest_sealed(
                    self, PostgresBackend(self, sync=False, native_sync=False), thread_id
                )
                forget_histories(self, thread_id)

    return DeltaReadingPostgresSaver


class _HeadMoved(Exception):
    """A run stored a newer head between the seal and the prune: seal it, and prune again."""


_SEALED_ATTEMPTS = 5
"""How many times a prune seals a thread's heads and tries again while runs keep storing."""


async def _keep_latest_sealed(saver: Any, backend: PostgresBackend, thread_id: str) -> None:
    """Seal every namespace's head of ``thread_id``, then run LangGraph's ``keep_latest``
    statements for it (:func:`_sealed_statements`); again if a head moved meanwhile."""
    from langgraph.checkpoint.postgres.base import _aexecute

    for _ in range(_SEALED_ATTEMPTS):
        heads = dict(await backend.latest_per_namespace(thread_id))
        foreign = await backend.unsealable_channels(thread_id, list(heads.values()))
        if foreign:
            raise NotImplementedError(
                f"keep_latest can't prune thread {thread_id!r}: its DeltaChannel "
                f"{', '.join(sorted(foreign))} is not the library's, and its head still needs "
                "its ancestors; prune it with prune_thread(keep_turns=...) instead"
            )
        for namespace, head in heads.items():
            await seal(backend, thread_id, namespace, head)
        try:
            async with saver._cursor() as cur:
                if saver.pipe:
                    await saver.pipe.sync()
                async with cur.connection.transaction():
                    await _aexecute(cur, _sealed_statements(thread_id, heads))
            return
        except _HeadMoved:
            continue
    raise StoreUnavailable(
        f"thread {thread_id!r} kept storing new checkpoints while it was pruned; "
        "prune it again once its runs are done"
    )


def _sealed_statements(thread_id: str, sealed: Mapping[str, str]) -> Any:
    """LangGraph's ``keep_latest`` statements for one thread, without its refusal of delta
    channels (every head was sealed), and stopped (rolled back) if a head is not the one
    sealed: a run stored a newer one after the seal."""
    from langgraph.checkpoint.postgres.base import (
        PRUNE_DELTA_THREADS_SQL,
        PRUNE_HEADS_SQL,
        _keep_latest,
    )

    statements = _keep_latest(thread_id)
    try:
        sql, params, fetch = next(statements)
        while True:
            if sql == PRUNE_DELTA_THREADS_SQL:
                sql, params, fetch = statements.send([])
                continue
            rows = yield sql, params, fetch
            if sql == PRUNE_HEADS_SQL and any(
                sealed.get(row["checkpoint_ns"]) != row["head"] for row in rows
            ):
                raise _HeadMoved(thread_id)
            sql, params, fetch = statements.send(rows)
    except StopIteration:
        return


async def _check_idle(connection: Any) -> None:
    """The pool's check of a connection handed out: raises if it no longer works.

    psycopg's own ``check_connection`` sends the server an empty query at every checkout: 0.43
    ms, more than a whole lookup (0.26 ms) on loopback, and a turn checks out a connection a
    dozen times or more. An idle connection has nothing to read unless the server spoke: a
    server that shuts down or ends the session sends its notice and closes the socket, and an
    asynchronous notice arrives the same way. So the socket is polled (no round trip), and only
    a connection with something to read, or one already closed or broken, gets the server's
    answer to an empty query. What neither check can see is a link cut without the server
    closing it; there the query fails, or waits for its timeout, as it would after the
    round trip.
    """
    from psycopg_pool import AsyncConnectionPool

    if connection.closed or connection.broken or _readable(connection.fileno()):
        await AsyncConnectionPool.check_connection(connection)


def _readable(fd: int) -> bool:
    """Whether ``fd`` has something to read now (``poll``, so any descriptor number works;
    where there is no ``poll``, always, which falls back to asking the server)."""
    if not hasattr(select, "poll"):  # pragma: no cover - Windows
        return True
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLPRI | select.POLLERR | select.POLLHUP)
    return bool(poller.poll(0))


@asynccontextmanager
async def open_postgres_saver(
    dsn: str, *, max_size: int = 4, read_only: bool = False
) -> AsyncIterator[Any]:
    """An ``AsyncPostgresSaver`` on a connection pool to ``dsn``, set up (extra ``postgres``).

    The pool's connections use the settings the saver's documentation gives: autocommit (its
    ``setup`` creates indexes concurrently, which cannot run in a transaction), statements
    prepared at their first execution (``prepare_threshold=0``; the library's lookups by a
    list of checkpoints opt out, see :mod:`mcp_state_versions.backends.postgres`), and dict
    rows.

    ``read_only=True`` is a reader's pool: nothing is set up (a reader never creates tables, and
    a role allowed only to read may not), the server refuses any write on its connections
    (``default_transaction_read_only``, set as each connection opens, so a DSN's own
    ``options`` stay as given), and it opens one connection up front, growing to ``max_size``
    only as reads overlap. Whether the tables are there to read is the caller's to check
    (:func:`mcp_state_versions.checkpointers.open_checkpointer` does).
    """
    try:
        from psycopg.rows import dict_row
        from psycopg_pool import AsyncConnectionPool
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError(
            "PostgreSQL support needs the 'postgres' extra: "
            "pip install 'mcp-state-versions[postgres]'"
        ) from error
    kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    # ``check``: a connection the server dropped (a restart, an outage) is found at checkout
    # and replaced, rather than failing the query it was handed to (:func:`_check_idle`, which
    # asks the server only when it has said something). ``timeout``: a query
    # waiting for a connection while the server is away fails in seconds, not half a minute.
    # ``reconnect_timeout``: the pool gives up a reconnection after a moment instead of
    # retrying with a backoff that doubles for minutes, so the next query after the server is
    # back starts a fresh attempt and is served at once (the backoff, after a 46 s outage,
    # kept the pool away for 9 s more).
    pool = AsyncConnectionPool(
        dsn,
        # the pool's default, or fewer for a smaller pool; a reader's commands read once
        min_size=1 if read_only else min(4, max_size),
        max_size=max_size,
        kwargs=kwargs,
        open=False,
        configure=_refuse_writes if read_only else None,
        check=_check_idle,
        timeout=POOL_TIMEOUT_S,
        reconnect_timeout=RECONNECT_S,
    )
    async with pool:
        saver = _postgres_saver_class()(pool)
        if not read_only:
            await saver.setup()
        yield saver


async def _refuse_writes(connection: Any) -> None:
    """A reader's connection, as it opens: every transaction on it is read-only, so a write
    from any code path fails at the server instead of changing the store."""
    await connection.execute("SET default_transaction_read_only = on")


@dataclass(frozen=True, slots=True)
class PruneResult:
    """What :func:`prune_thread` removed (or, in a dry run, would remove) and what the
    thread's history holds after it. ``bytes_removed`` is about what storage held for the
    checkpoints removed: their rows, their writes, and values no kept checkpoint shares."""

    deleted: int
    retained_turns: range
    total_turns: int
    bytes_removed: int = 0
    dry_run: bool = False


async def prune_thread(
    saver: BaseCheckpointSaver,
    thread_id: str,
    *,
    keep_turns: int | None = None,
    drop_abandoned: bool = False,
    dry_run: bool = False,
) -> PruneResult:
    """Remove a thread's history older than its last ``keep_turns`` turns, and/or abandoned
    branches.

    ``keep_turns=N`` keeps every checkpoint of the current branch from the first checkpoint of
    turn ``total - N + 1`` on (so turns ``total - N + 1 .. total`` stay readable), and deletes
    the older ones with their writes and blobs. ``drop_abandoned=True`` deletes every
    checkpoint that is not on the current branch (left behind by a fork). Only the root
    namespace is pruned. The head is never removed, so the thread can go on, and the oldest
    checkpoint kept is sealed first (:func:`seal`), so every retained turn still rebuilds; so
    is the first checkpoint of any other branch whose parent goes.

    ``dry_run=True`` changes nothing and reports the same figures the real prune would.

    Both read the thread once, and a checkpoint saved after that read is never deleted. A
    branch that forked off and is still running is, to ``drop_abandoned``, a branch like any
    other: drop abandoned branches where no run is going on beside the current one.
    """
    from .checkpoint_walk import CheckpointHistory, _Chain

    if keep_turns is not None and keep_turns < 1:
        raise ValueError(f"keep_turns must be at least 1 (the current turn), got {keep_turns}")
    if keep_turns is None and not drop_abandoned:
        raise ValueError("say what to prune: keep_turns=N, drop_abandoned=True, or both")
    history = CheckpointHistory(saver)
    everything, links = await history._read_chain(thread_id)
    chain = _Chain(history, thread_id, links)
    on_branch = [link[ID] for link in chain.links]
    doomed: list[str] = []
    if keep_turns is not None and chain.links:
        total = turn_at(await chain.position(0, trust_stamps=False))
        cut = total - keep_turns + 1
        if cut > 1:
            boundary = await chain.end_of_turn(cut - 1, trust_stamps=False)
            if boundary is not None:
                boundary = max(boundary, 1)  # the head stays, whatever its clock says
                doomed.extend(on_branch[boundary:])
                if not dry_run:
                    await seal(
                        history.backend, thread_id, history.namespace, on_branch[boundary - 1]
                    )
    if drop_abandoned and on_branch:
        # From the same read as the chain, and only what is older than the head it was read
        # from: a checkpoint saved meanwhile (the next step of a run, a run beside it on
        # another branch) is not abandoned, and was never in this read to be counted so.
        head = on_branch[0]
        if everything is None:
            everything_ids = await history.checkpoint_ids(thread_id)
        else:
            everything_ids = [link[ID] for link in everything]
        kept = set(on_branch)
        doomed.extend(sorted(c for c in everything_ids if c not in kept and c < head))
    doomed = [checkpoint for checkpoint in doomed if checkpoint != on_branch[0]]  # never the head
    removed = await history.backend.stored_bytes(thread_id, history.namespace, doomed)
    if dry_run:
        gone = set(doomed)
        index = await _Chain(history, thread_id, [c for c in links if c[ID] not in gone]).index(
            planned=True
        )
        return PruneResult(len(doomed), index.retained, index.total, removed, dry_run=True)
    if doomed:
        gone = set(doomed)
        # Another branch (a fork, or a run beside this one) may start from a checkpoint about
        # to go: its first checkpoint is sealed too, or it would rebuild from nothing.
        for link in everything or ():
            if link[ID] not in gone and link[PARENT] in gone:
                await seal(history.backend, thread_id, history.namespace, link[ID])
        await history.backend.delete(thread_id, history.namespace, doomed)
    index = await history.turns(thread_id)
    return PruneResult(len(doomed), index.retained, index.total, removed)
