"""Backends: what the checkpoint walk and retention need from a saver, one module per family.

The walk (:mod:`mcp_state_versions.walk.checkpoints`) and retention
(:mod:`mcp_state_versions.retention.prune`) are written against :class:`Backend` and know no SQL, no
blob layout and no serializer. Each module here reads one family of savers the cheapest way
its storage allows:

* :mod:`.memory`: ``InMemorySaver`` and subclasses (the Agent Server's in-memory runtime is
  one), straight from its dicts;
* :mod:`.sqlite`: ``SqliteSaver`` and ``AsyncSqliteSaver``, by SQL on their table;
* :mod:`.postgres`: ``PostgresSaver`` and ``AsyncPostgresSaver``, by SQL on their tables;
* any other ``BaseCheckpointSaver``: :class:`Backend` itself, through its public API only.

:mod:`.base` holds that contract (:class:`Backend`, the shape of a lineage row, the damage a
chain can show); :mod:`.sql` what the SQL backends share (the loop that reads a delta history
a statement at a time); this module re-exports both and picks a backend (:func:`backend_for`).

What a process remembers of ``tool_state``'s delta histories, and what the library's savers
stored since, is :mod:`.known`: every family's delta-history read stops at the checkpoint
it remembers.

A turn read needs three things, and a backend offers exactly those: the *lineage* (ids, parents
and the turn stamp of every checkpoint of a namespace, without channel values), the
``tool_state`` channel of one checkpoint (which carries the turn clock), and, for threads older
than the clock, a checkpoint's messages. Never the whole checkpoint when a channel will do:
every checkpoint carries the whole message list, and rebuilding it is most of what a load costs.

``tool_state`` is stored as writes (:mod:`mcp_state_versions.storage.tool_state`): a checkpoint
holds a snapshot, a whole value (threads of the previous release), or nothing. A backend reads what
is stored (:meth:`Backend.stored_tool_state`); where nothing is, :meth:`Backend.tool_state`
rebuilds the value from the nearest seed on the checkpoint's own parent chain and the writes
after it, read with the saver's ``get_delta_channel_history`` (which follows parents, so a
branch a fork abandoned never contributes).

**Sync and async.** Every method is a coroutine. A backend built with ``sync=True`` calls the
saver's synchronous API inside them and never suspends, so a synchronous caller (a tool under
``graph.invoke``) drives the same walk with :func:`run_sync`; one that would have to suspend
raises :class:`NeedsAsync` instead of blocking. A new backend is one module with one class.
"""

from __future__ import annotations

from langgraph.checkpoint.base import BaseCheckpointSaver

from ..storage.tool_state import Reducer
from .base import (
    COUNTER,
    ID,
    MAX_CHAIN,
    PARENT,
    SOURCE,
    STAMP,
    UNREAD,
    Backend,
    Link,
    LinkRow,
    NeedsAsync,
    checkpoint_time,
    missing_parent,
    parent_cycle,
    refused,
    run_sync,
    stamp_turn,
    storable,
    thread_cursor,
    unreachable,
)
from .known import (
    TOOL_STATE,
    Known,
    forget_histories,
    known_history,
    remember_history,
    remembers_run_starts,
)
from .sql import (
    ChainRead,
    ChainReader,
    SqlBackend,
    assembled,
    chained_history,
    in_applied_order,
    pending_writes,
    start_link,
    writes_by_checkpoint,
)

__all__ = [
    "COUNTER",
    "ID",
    "MAX_CHAIN",
    "PARENT",
    "SOURCE",
    "STAMP",
    "TOOL_STATE",
    "UNREAD",
    "Backend",
    "ChainRead",
    "ChainReader",
    "Known",
    "Link",
    "LinkRow",
    "NeedsAsync",
    "SqlBackend",
    "assembled",
    "backend_for",
    "chained_history",
    "checkpoint_time",
    "forget_histories",
    "in_applied_order",
    "known_history",
    "missing_parent",
    "parent_cycle",
    "pending_writes",
    "refused",
    "remember_history",
    "remembers_run_starts",
    "run_sync",
    "stamp_turn",
    "start_link",
    "storable",
    "thread_cursor",
    "unreachable",
    "writes_by_checkpoint",
]


def backend_for(
    saver: BaseCheckpointSaver, *, sync: bool = False, reducer: Reducer | None = None
) -> Backend:
    """The backend that reads ``saver`` fastest; :class:`Backend` itself for unknown savers.

    Recognises subclasses too (the Agent Server's in-memory saver subclasses ``InMemorySaver``).
    ``sync=True`` reads through the saver's synchronous API (:func:`run_sync`). ``reducer`` is
    the graph's, for rebuilding stored state (``None``: the bounds the state records).
    """
    from langgraph.checkpoint.memory import InMemorySaver

    backend: Backend | None = None
    if isinstance(saver, InMemorySaver):
        from .memory import MemoryBackend

        backend = MemoryBackend(saver, sync=sync)
    if backend is None:
        from .sqlite import sqlite_backend

        backend = sqlite_backend(saver, sync=sync)
    if backend is None:
        from .postgres import postgres_backend

        backend = postgres_backend(saver, sync=sync)
    if backend is None:
        backend = Backend(saver, sync=sync)
    backend.reducer = reducer
    return backend
