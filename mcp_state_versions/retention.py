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

Pruning here does not cover graphs that use LangGraph's beta ``DeltaChannel`` (whose values are
rebuilt by replaying ancestors' writes); the library's own graphs do not use it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Literal

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

__all__ = [
    "PruneResult",
    "PruningInMemorySaver",
    "PruningSqliteSaver",
    "open_postgres_saver",
    "prune_thread",
]

Strategy = Literal["keep_latest", "delete"]


def _check_strategy(strategy: str) -> None:
    if strategy not in ("keep_latest", "delete"):
        raise ValueError(f"unknown prune strategy {strategy!r}; use 'keep_latest' or 'delete'")


class PruningInMemorySaver(InMemorySaver):
    """``InMemorySaver`` with ``aprune``/``prune`` implemented."""

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        _check_strategy(strategy)
        for thread_id in thread_ids:
            if strategy == "delete":
                self.delete_thread(thread_id)
                continue
            for namespace, stored in list(self.storage.get(thread_id, {}).items()):
                if stored:
                    latest = max(stored)
                    self._delete(thread_id, namespace, [i for i in stored if i != latest])

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        self.prune(thread_ids, strategy=strategy)

    def _delete(self, thread_id: str, namespace: str, checkpoint_ids: Iterable[str]) -> None:
        """Remove checkpoints with their writes, then blobs no remaining checkpoint uses."""
        stored = self.storage[thread_id][namespace]
        for checkpoint_id in checkpoint_ids:
            stored.pop(checkpoint_id, None)
            self.writes.pop((thread_id, namespace, checkpoint_id), None)
        used = {
            (channel, version)
            for checkpoint, _, _ in stored.values()
            for channel, version in self.serde.loads_typed(checkpoint)["channel_versions"].items()
        }
        for key in [k for k in self.blobs if k[:2] == (thread_id, namespace)]:
            if (key[2], key[3]) not in used:
                del self.blobs[key]


class PruningSqliteSaver(AsyncSqliteSaver):
    """``AsyncSqliteSaver`` with ``aprune`` implemented (SQLite keeps no separate blobs)."""

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        _check_strategy(strategy)
        await self.setup()
        for thread_id in thread_ids:
            if strategy == "delete":
                await self.adelete_thread(thread_id)
                continue
            async with self.lock:
                for table in ("writes", "checkpoints"):
                    await self.conn.execute(
                        f"DELETE FROM {table} WHERE thread_id = ? AND checkpoint_id < ("
                        "SELECT MAX(c.checkpoint_id) FROM checkpoints c WHERE c.thread_id = "
                        f"{table}.thread_id AND c.checkpoint_ns = {table}.checkpoint_ns)",
                        (thread_id,),
                    )
                await self.conn.commit()

    async def _delete(self, thread_id: str, namespace: str, checkpoint_ids: Sequence[str]) -> None:
        await self.setup()
        marks = ",".join("?" * len(checkpoint_ids))
        async with self.lock:
            for table in ("writes", "checkpoints"):
                await self.conn.execute(
                    f"DELETE FROM {table} WHERE thread_id = ? AND checkpoint_ns = ? "
                    f"AND checkpoint_id IN ({marks})",
                    (thread_id, namespace, *checkpoint_ids),
                )
            await self.conn.commit()


@asynccontextmanager
async def open_postgres_saver(dsn: str, *, max_size: int = 4) -> AsyncIterator[Any]:
    """An ``AsyncPostgresSaver`` on a connection pool to ``dsn``, set up (extra ``postgres``).

    The pool's connections use the settings the saver requires: autocommit (its ``setup``
    creates indexes concurrently, which cannot run in a transaction), no prepared statements,
    and dict rows.
    """
    try:
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
        from psycopg.rows import dict_row
        from psycopg_pool import AsyncConnectionPool
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError(
            "PostgreSQL support needs the 'postgres' extra: "
            "pip install 'mcp-state-versions[postgres]'"
        ) from error
    kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    async with AsyncConnectionPool(dsn, max_size=max_size, kwargs=kwargs, open=False) as pool:
        saver = AsyncPostgresSaver(pool)  # type: ignore[arg-type]
        await saver.setup()
        yield saver


async def _delete_postgres(
    saver: Any, thread_id: str, namespace: str, checkpoint_ids: Sequence[str]
) -> None:
    """Delete checkpoints, their writes, and blob versions no remaining checkpoint refers to."""
    ids = list(checkpoint_ids)
    async with saver._cursor() as cursor:
        await cursor.execute(
            "DELETE FROM checkpoint_writes WHERE thread_id = %s AND checkpoint_ns = %s "
            "AND checkpoint_id = ANY(%s)",
            (thread_id, namespace, ids),
        )
        await cursor.execute(
            "DELETE FROM checkpoints WHERE thread_id = %s AND checkpoint_ns = %s "
            "AND checkpoint_id = ANY(%s)",
            (thread_id, namespace, ids),
        )
        await cursor.execute(
            "DELETE FROM checkpoint_blobs b WHERE b.thread_id = %s AND b.checkpoint_ns = %s "
            "AND NOT EXISTS (SELECT 1 FROM checkpoints c WHERE c.thread_id = b.thread_id "
            "AND c.checkpoint_ns = b.checkpoint_ns "
            "AND c.checkpoint -> 'channel_versions' ->> b.channel = b.version)",
            (thread_id, namespace),
        )


async def _delete(
    saver: BaseCheckpointSaver, thread_id: str, checkpoint_ids: Sequence[str]
) -> None:
    if not checkpoint_ids:
        return
    if isinstance(saver, PruningInMemorySaver):
        saver._delete(thread_id, "", checkpoint_ids)
        return
    if isinstance(saver, PruningSqliteSaver):
        await saver._delete(thread_id, "", checkpoint_ids)
        return
    try:
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    except ImportError:  # pragma: no cover
        AsyncPostgresSaver = None  # type: ignore[assignment,misc]
    if AsyncPostgresSaver is not None and isinstance(saver, AsyncPostgresSaver):
        await _delete_postgres(saver, thread_id, "", checkpoint_ids)
        return
    raise TypeError(
        f"prune_thread cannot delete from {type(saver).__name__}; use PruningInMemorySaver, "
        "PruningSqliteSaver or AsyncPostgresSaver (see mcp_state_versions.checkpointers)"
    )


@dataclass(frozen=True, slots=True)
class PruneResult:
    """What :func:`prune_thread` removed and what the thread's history now holds."""

    deleted: int
    retained_turns: tuple[int, ...]
    total_turns: int


async def prune_thread(
    saver: BaseCheckpointSaver,
    thread_id: str,
    *,
    keep_turns: int | None = None,
    drop_abandoned: bool = False,
) -> PruneResult:
    """Remove a thread's history older than its last ``keep_turns`` turns, and/or abandoned
    branches.

    ``keep_turns=N`` keeps every checkpoint of the current branch from the first checkpoint of
    turn ``total - N + 1`` on (so turns ``total - N + 1 .. total`` stay readable), and deletes
    the older ones with their writes and blobs. ``drop_abandoned=True`` deletes every
    checkpoint that is not on the current branch (left behind by a fork). Only the root
    namespace is pruned. The head is never removed, so the thread can go on.
    """
    from .checkpoint_walk import CheckpointHistory

    if keep_turns is not None and keep_turns < 1:
        raise ValueError(f"keep_turns must be at least 1 (the current turn), got {keep_turns}")
    if keep_turns is None and not drop_abandoned:
        raise ValueError("say what to prune: keep_turns=N, drop_abandoned=True, or both")
    history = CheckpointHistory(saver)
    chain = await history._chain(thread_id)
    on_branch = [link.checkpoint_id for link in chain.links]
    doomed: list[str] = []
    if keep_turns is not None and chain.links:
        total = await chain.turn(0, trust_stamps=False)
        cut = total - keep_turns + 1
        if cut > 1:
            boundary = await chain.end_of_turn(cut - 1, trust_stamps=False)
            if boundary is not None:
                doomed.extend(on_branch[boundary:])
    if drop_abandoned:
        everything = await history.checkpoint_ids(thread_id)
        doomed.extend(sorted(set(everything) - set(on_branch)))
    await _delete(saver, thread_id, doomed)
    index = await history.turns(thread_id)
    return PruneResult(deleted=len(doomed), retained_turns=index.retained, total_turns=index.total)
