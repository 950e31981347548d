"""``PruningSqliteSaver``: LangGraph's ``AsyncSqliteSaver`` with ``aprune`` implemented and its
delta histories read from the library's lineage index."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from ..backends.sqlite import SqliteBackend
from ..retention.prune import seal
from .base import NotesWhatItStores, check_strategy, delta_histories

__all__ = ["PruningSqliteSaver"]


class PruningSqliteSaver(NotesWhatItStores, AsyncSqliteSaver):
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
        check_strategy(strategy)
        await self.setup()
        for thread_id in thread_ids:
            if strategy == "delete":
                await self.adelete_thread(thread_id)
                continue
            backend = SqliteBackend(self, sync=False, native_sync=False)
            for namespace, latest in await backend.latest_per_namespace(thread_id):
                await seal(backend, thread_id, namespace, latest)
            await backend.keep_latest(thread_id)
