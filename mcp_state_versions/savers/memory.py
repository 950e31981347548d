"""``PruningInMemorySaver``: LangGraph's ``InMemorySaver`` with ``prune`` implemented and its
delta histories read without decoding every checkpoint at every run start."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langgraph.checkpoint.memory import InMemorySaver

from ..backends import TOOL_STATE, backend_for, run_sync
from ..backends.known import (
    MESSAGES,
    note_checkpoint,
    note_writes,
)
from ..backends.memory import MemoryBackend, delete_checkpoints, forget
from ..retention.prune import seal
from ..state.credentials import SECRET_NAMES
from .base import check_strategy, remembered_messages, storable, where
from .resumes import check_resume_sync, note_start

__all__ = ["PruningInMemorySaver"]


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
        thread_id, namespace, checkpoint_id = where(config)
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
        thread_id, namespace, parent = where(config)
        note_checkpoint(self, thread_id, namespace, checkpoint["id"], parent, metadata)
        return super().put(config, checkpoint, metadata, new_versions)

    def get_tuple(self, config: Any) -> Any:
        found = super().get_tuple(config)
        note_start(self, found)  # a resume reads the paused checkpoint through here
        return found

    secret_names: str | None = SECRET_NAMES
    """Fields named like these are never stored in ``tool_state``: a write holding one is
    refused (:func:`~mcp_state_versions.state.reducer.refuse_secret_writes`); ``None``
    stores all."""

    def put_writes(
        self, config: Any, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        writes = storable(self, writes)
        super().put_writes(config, writes, task_id, task_path)
        check_resume_sync(self, config, writes, task_id)
        note_writes(self, *where(config), writes, task_id, task_path)  # type: ignore[arg-type]

    async def aget_delta_channel_history(
        self, *, config: Any, channels: Sequence[str]
    ) -> Mapping[str, Any]:
        return self.get_delta_channel_history(config=config, channels=channels)

    def delete_thread(self, thread_id: str) -> None:
        super().delete_thread(thread_id)
        forget(self, thread_id)

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        check_strategy(strategy)
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
