"""What the library's savers share: a call's thread, the writes they store, the notes they keep.

Each of the library's savers (:mod:`.memory`, :mod:`.sqlite`, :mod:`.postgres`) is LangGraph's
saver of that family with the same storage and three additions: a run start reads its delta
histories from what this process remembers, or else in one statement; what it stores is
noted (:mod:`mcp_state_versions.backends.known`, :mod:`.stamps`, :mod:`.resumes`), so the next
run start need not read it back; and a write holding a credential is refused before anything
is stored. This module holds those additions once, for all three.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..backends import TOOL_STATE
from ..backends.known import (
    MESSAGES,
    caught_up,
    forget_histories,
    note_checkpoint,
    note_writes,
    remember_history,
)
from ..state.credentials import SECRET_NAMES
from ..state.reducer import refuse_secret_writes
from ..storage.messages import storable_writes
from .resumes import check_resume, note_start
from .stamps import note_stamp, settle

if TYPE_CHECKING:
    from ..backends.postgres import PostgresBackend
    from ..backends.sqlite import SqliteBackend

__all__ = [
    "NotesWhatItStores",
    "check_strategy",
    "delta_histories",
    "remembered_messages",
    "storable",
    "where",
]


def check_strategy(strategy: str) -> None:
    if strategy not in ("keep_latest", "delete"):
        raise ValueError(f"unknown prune strategy {strategy!r}; use 'keep_latest' or 'delete'")


def where(config: Any) -> tuple[str, str, str | None]:
    """``(thread id, namespace, checkpoint id)`` a saver call's config names (the id ``None``
    where it names none: the head; for a put, the new checkpoint's parent)."""
    configurable = config["configurable"]
    return (
        str(configurable["thread_id"]),
        configurable.get("checkpoint_ns", ""),
        configurable.get("checkpoint_id"),
    )


def storable(saver: Any, writes: Sequence[tuple[str, Any]]) -> Sequence[tuple[str, Any]]:
    """``writes`` as the library's savers store them: writes of ``tool_state`` holding a
    credential refused before anything is stored, and ``messages`` writes in a form the
    serializer keeps (:func:`~mcp_state_versions.storage.messages.storable_writes`)."""
    for channel, value in writes:
        if channel == TOOL_STATE:
            refuse_secret_writes(value, saver.secret_names)
    return storable_writes(writes)


class NotesWhatItStores:
    """For a database saver: tells :mod:`mcp_state_versions.backends.known` each checkpoint
    it puts (before storing it) and each write it stored, so that a run start continuing what
    this process wrote rebuilds ``tool_state`` with no read of its writes
    (:func:`~mcp_state_versions.backends.known.caught_up`). A checkpoint that fails to store
    forgets the thread's remembered history: what was noted no longer matches storage.

    It also notes the turn stamp of each checkpoint it reads or puts, and settles the stamp
    :func:`~mcp_state_versions.agent.build.run_turn` leaves to it from the parent's
    (:mod:`mcp_state_versions.savers.stamps`)."""

    serde: Any

    stamps_at_put = True
    """It settles the turn stamp :func:`~mcp_state_versions.agent.build.run_turn` leaves to it
    (:mod:`mcp_state_versions.savers.stamps`)."""

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
        thread_id, namespace, parent = where(config)
        note_stamp(self, thread_id, namespace, checkpoint["id"], metadata)
        note_checkpoint(self, thread_id, namespace, checkpoint["id"], parent, metadata)
        try:
            return await super().aput(config, checkpoint, metadata, new_versions)  # type: ignore[misc]
        except BaseException:
            forget_histories(self, thread_id)
            raise

    secret_names: str | None = SECRET_NAMES
    """Fields named like these are never stored in ``tool_state``: a write holding one is
    refused (:func:`~mcp_state_versions.state.reducer.refuse_secret_writes`); ``None``
    stores all."""

    async def aput_writes(
        self, config: Any, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        writes = storable(self, writes)
        await super().aput_writes(config, writes, task_id, task_path)  # type: ignore[misc]
        await check_resume(self, config, writes, task_id)
        # (an SQLite file from before task paths stores none, and a read sorts by "")
        stored_path = task_path if getattr(self, "_has_task_path", True) else ""
        note_writes(self, *where(config), writes, task_id, stored_path)  # type: ignore[arg-type]


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
    thread_id, namespace, checkpoint_id = where(config)
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
    thread_id, namespace, checkpoint_id = where(config)
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
