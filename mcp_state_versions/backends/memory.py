"""``InMemorySaver`` (and subclasses): lineage, channels and deletes straight from its dicts.

The saver keeps ``storage[thread][namespace][checkpoint_id] = (checkpoint, metadata, parent)``
with channel values in ``blobs`` by version, so a channel is one dict lookup and one
deserialization, and no message is rebuilt to read ``tool_state``. Its API is the same under
sync and async runs, so one class serves both.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ..state.reducer import TURN_METADATA_KEY
from ..storage.tool_state import NOTHING_STORED, snapshot
from .base import MAX_CHAIN, Backend, Link, LinkRow, missing_parent, parent_cycle
from .known import TOOL_STATE, forget_histories, known_history
from .sql import assembled, writes_by_checkpoint

__all__ = ["MemoryBackend", "delete_checkpoints", "forget"]

_LINKS = "_mcp_state_versions_links"
_VERSIONS = "_mcp_state_versions_tool_state_versions"
"""Attributes on the saver holding what is parsed once per checkpoint: its link (parent,
stamp, source, delta counter) and its ``tool_state`` version. A checkpoint never changes once
saved, so both hold until it is deleted (:func:`forget`)."""


class MemoryBackend(Backend):
    """:class:`~mcp_state_versions.backends.Backend` over an ``InMemorySaver``."""

    def _stored(self, thread_id: str, namespace: str) -> dict[str, Any]:
        return self.saver.storage.get(thread_id, {}).get(namespace, {})  # type: ignore[attr-defined]

    async def lineage(self, thread_id: str, namespace: str) -> list[LinkRow]:
        # The saver adds checkpoints in the order they are made, so newest first is that
        # reversed.
        stored = self._stored(thread_id, namespace)
        return [
            self._link(thread_id, namespace, checkpoint_id, saved)
            for checkpoint_id, saved in reversed(list(stored.items()))
        ]

    def _link(self, thread_id: str, namespace: str, checkpoint_id: str, saved: Any) -> LinkRow:
        # A checkpoint never changes once saved, so its link is parsed once per saver.
        cache = self.saver.__dict__.setdefault(_LINKS, {})
        key = (thread_id, namespace, checkpoint_id)
        link = cache.get(key)
        if link is None:
            _, metadata, parent_id = saved
            meta = self.saver.serde.loads_typed(metadata) if metadata else {}
            stamp = meta.get(TURN_METADATA_KEY)
            counter = (meta.get("counters_since_delta_snapshot") or {}).get(TOOL_STATE)
            link = cache[key] = (checkpoint_id, parent_id, stamp, meta.get("source"), counter)
        return link

    async def parent_of(self, thread_id: str, namespace: str, checkpoint_id: str) -> Link | None:
        saved = self._stored(thread_id, namespace).get(checkpoint_id)
        if saved is None:
            return None
        return Link(*self._link(thread_id, namespace, checkpoint_id, saved)[:4])

    async def head(self, thread_id: str, namespace: str) -> str | None:
        stored = self._stored(thread_id, namespace)
        return max(stored) if stored else None

    async def threads(self, after: str | None, limit: int) -> list[tuple[str, str]]:
        storage = self.saver.storage  # type: ignore[attr-defined]
        ids = sorted(t for t in storage if (after is None or t > after) and storage[t].get(""))
        return [(thread, max(storage[thread][""])) for thread in ids[:limit]]

    async def recent_threads(
        self, before: str | None, limit: int, contains: str | None = None
    ) -> list[tuple[str, str]]:
        from .base import _recent

        storage = self.saver.storage  # type: ignore[attr-defined]
        heads = [(thread, max(spaces[""])) for thread, spaces in storage.items() if spaces.get("")]
        return _recent(heads, before, limit, contains)

    async def stored_bytes(
        self, thread_id: str, namespace: str | None, checkpoint_ids: Sequence[str] | None
    ) -> int:
        saver = self.saver
        namespaces = saver.storage.get(thread_id, {})  # type: ignore[attr-defined]
        total = 0
        for ns, stored in namespaces.items():
            if namespace is not None and ns != namespace:
                continue
            chosen = set(stored) if checkpoint_ids is None else set(checkpoint_ids) & set(stored)
            used: dict[tuple[str, Any], set[str]] = {}
            for checkpoint_id, (checkpoint, metadata, _) in stored.items():
                versions = saver.serde.loads_typed(checkpoint)["channel_versions"]
                for channel, version in versions.items():
                    used.setdefault((channel, version), set()).add(checkpoint_id)
                if checkpoint_id in chosen:
                    total += len(checkpoint[1]) + len(metadata[1] if metadata else b"")
                    writes = saver.writes.get((thread_id, ns, checkpoint_id), {})  # type: ignore[attr-defined]
                    total += sum(len(write[2][1] or b"") for write in writes.values())
            for (channel, version), users in used.items():
                blob = saver.blobs.get((thread_id, ns, channel, version))  # type: ignore[attr-defined]
                if blob is not None and users <= chosen:
                    total += len(blob[1] or b"")
        return total

    def _version(
        self, thread_id: str, namespace: str, checkpoint_id: str, channel: str = TOOL_STATE
    ) -> tuple[bool, Any]:
        saved = self._stored(thread_id, namespace).get(checkpoint_id)
        if saved is None:
            return False, None
        checkpoint = self.saver.serde.loads_typed(saved[0])
        return True, checkpoint["channel_versions"].get(channel)

    async def stored_tool_state(
        self, thread_id: str, namespace: str, checkpoint_id: str, channel: str = TOOL_STATE
    ) -> tuple[bool, Any]:
        return self._stored_tool_state(thread_id, namespace, checkpoint_id, channel)

    def _stored_tool_state(
        self, thread_id: str, namespace: str, checkpoint_id: str, channel: str = TOOL_STATE
    ) -> tuple[bool, Any]:
        found, version = self._version(thread_id, namespace, checkpoint_id, channel)
        if not found or version is None:
            return found, None
        blob = self.saver.blobs.get((thread_id, namespace, channel, version))  # type: ignore[attr-defined]
        if blob is None or blob[0] == "empty":
            return True, NOTHING_STORED
        return True, self.saver.serde.loads_typed(blob)

    async def _delta_history(
        self, thread_id: str, namespace: str, checkpoint_id: str, channel: str = TOOL_STATE
    ) -> Any:
        if channel != TOOL_STATE:  # the saver's own read (the library's remembers messages')
            return await super()._delta_history(thread_id, namespace, checkpoint_id, channel)
        return self.delta_history(thread_id, namespace, checkpoint_id)

    def delta_history(
        self, thread_id: str, namespace: str, checkpoint_id: str | None, *, remember: bool = False
    ) -> dict[str, Any]:
        """``tool_state``'s delta history at a checkpoint (the thread's newest when ``None``),
        in LangGraph's form: the seed, and the writes after it, oldest first.

        The same walk as the saver's own ``get_delta_channel_history``: up the parents from
        the checkpoint's parent (a checkpoint's own value is what its parent's writes made) to
        the nearest one whose blob at its ``tool_state`` version holds a value. The stock read
        decodes every checkpoint on the way to learn its version, at every run start, which on
        a thread far past its snapshot was most of what a turn cost beyond a plain agent's;
        here each checkpoint's version is decoded once per saver (:meth:`_tool_state_version`)
        and the walk is dict lookups. The blob is what decides, not the delta counter in the
        metadata: blobs are shared by version, so a snapshot a prune writes for one checkpoint
        (:meth:`write_snapshot`) serves the others at that version too, counters and all.
        Up to the checkpoint whose history a run start read last (:func:`known_history`), it
        is that history; ``remember``: keep this one as that (a run start).
        """
        stored = self._stored(thread_id, namespace)
        if checkpoint_id is None:
            checkpoint_id = max(stored, default="")
        known = known_history(self.saver, thread_id, namespace)
        if known is not None and known.checkpoint_id == checkpoint_id:
            return known.copied()
        blobs = self.saver.blobs  # type: ignore[attr-defined]
        saved = stored.get(checkpoint_id)
        current = saved[2] if saved is not None else None
        chain: list[str] = []
        seed: Any = NOTHING_STORED
        reached = False
        while current is not None and (saved := stored.get(current)) is not None:
            if len(chain) >= MAX_CHAIN:
                raise parent_cycle(thread_id, current)
            chain.append(current)
            version = self._tool_state_version(thread_id, namespace, current, saved)
            blob = (
                None if version is None else blobs.get((thread_id, namespace, TOOL_STATE, version))
            )
            if blob is not None and blob[0] != "empty":
                seed = self.saver.serde.loads_typed(blob)
                break
            if known is not None and current == known.checkpoint_id:
                reached = True  # the rest is the known history
                break
            current = saved[2]
        if seed is NOTHING_STORED and not reached and current is not None and not remember:
            # The walk ended at a parent not in the thread: damage if the checkpoint before it
            # holds tool_state (as writes: it had no value of its own), no prune (a prune
            # stores a snapshot in the oldest checkpoint it keeps).
            last = chain[-1] if chain else checkpoint_id
            held = stored.get(last)
            if held is not None and self._tool_state_version(thread_id, namespace, last, held):
                raise missing_parent(thread_id, last, current)
        rows = self._write_rows(thread_id, namespace, chain)
        return assembled(
            self.saver,
            thread_id,
            namespace,
            checkpoint_id,
            known=known if reached else None,
            chain=chain,
            rows=rows,
            seed=seed,
            remember=remember,
        )

    def _tool_state_version(
        self, thread_id: str, namespace: str, checkpoint_id: str, saved: Any
    ) -> Any:
        """The checkpoint's ``tool_state`` version (``None``: never written), decoded once per
        saver: a checkpoint never changes once saved."""
        cache = self.saver.__dict__.setdefault(_VERSIONS, {})
        key = (thread_id, namespace, checkpoint_id)
        if key not in cache:
            versions = self.saver.serde.loads_typed(saved[0]).get("channel_versions") or {}
            cache[key] = versions.get(TOOL_STATE)
        return cache[key]

    async def writes_of(
        self, thread_id: str, namespace: str, checkpoint_ids: Sequence[str]
    ) -> dict[str, list[Any]]:
        rows = self._write_rows(thread_id, namespace, checkpoint_ids)
        return writes_by_checkpoint(rows, checkpoint_ids, self.saver.serde.loads_typed)

    def _write_rows(
        self, thread_id: str, namespace: str, checkpoint_ids: Sequence[str]
    ) -> list[tuple[Any, ...]]:
        """``tool_state``'s stored write rows at ``checkpoint_ids``, as the SQL backends read
        them: ``(checkpoint_id, task_path, task_id, idx, type, blob)``."""
        # saver.writes[(thread, ns, checkpoint)][(task_id, idx)] = (task_id, channel, blob, path)
        return [
            (checkpoint_id, write[3], write[0], idx, *write[2])
            for checkpoint_id in checkpoint_ids
            for (_, idx), write in self.saver.writes.get(  # type: ignore[attr-defined]
                (thread_id, namespace, checkpoint_id), {}
            ).items()
            if write[1] == TOOL_STATE
        ]

    async def write_snapshot(
        self,
        thread_id: str,
        namespace: str,
        checkpoint_id: str,
        value: Any,
        channel: str = TOOL_STATE,
    ) -> None:
        # Blobs are keyed by channel version, and checkpoints sharing a version share a value,
        # so the snapshot serves each of them.
        found, version = self._version(thread_id, namespace, checkpoint_id, channel)
        if found and version is not None:
            self.saver.blobs[(thread_id, namespace, channel, version)] = (  # type: ignore[attr-defined]
                self.saver.serde.dumps_typed(snapshot(value))
            )
            # Its delta counter goes too: it says a checkpoint stores no value (COUNTER).
            stored = self._stored(thread_id, namespace)
            checkpoint, metadata, parent = stored[checkpoint_id]
            serde = self.saver.serde
            meta = serde.loads_typed(metadata) if metadata else {}
            (meta.get("counters_since_delta_snapshot") or {}).pop(channel, None)
            stored[checkpoint_id] = (checkpoint, serde.dumps_typed(meta), parent)
            links = self.saver.__dict__.get(_LINKS, {})
            links.pop((thread_id, namespace, checkpoint_id), None)

    async def delete(self, thread_id: str, namespace: str, checkpoint_ids: Sequence[str]) -> None:
        delete_checkpoints(self.saver, thread_id, namespace, checkpoint_ids)

    async def delete_thread(self, thread_id: str) -> None:
        await super().delete_thread(thread_id)
        forget(self.saver, thread_id)

    async def delete_idle_thread(self, thread_id: str, head: str) -> bool:
        # No await between the check and the delete: no run of this process stores between.
        stored = self._stored(thread_id, "")
        if not stored or max(stored) != head:
            return False
        self.saver.delete_thread(thread_id)
        forget(self.saver, thread_id)
        return True

    async def delete_writes(
        self, thread_id: str, namespace: str, checkpoint_id: str, task_ids: Sequence[str]
    ) -> None:
        delete_writes(self.saver, thread_id, namespace, checkpoint_id, task_ids)


def delete_writes(
    saver: Any, thread_id: str, namespace: str, checkpoint_id: str, task_ids: Iterable[str]
) -> None:
    """Remove the writes of ``task_ids`` from one checkpoint."""
    stored = saver.writes.get((thread_id, namespace, checkpoint_id))
    if stored:
        doomed = set(task_ids)
        for inner in [inner for inner in stored if inner[0] in doomed]:
            del stored[inner]
    forget_histories(saver, thread_id)


def delete_checkpoints(
    saver: Any, thread_id: str, namespace: str, checkpoint_ids: Iterable[str]
) -> None:
    """Remove checkpoints with their writes, then blobs no remaining checkpoint uses."""
    stored = saver.storage.get(thread_id, {}).get(namespace)
    if stored is None:
        return
    checkpoint_ids = list(checkpoint_ids)
    for checkpoint_id in checkpoint_ids:
        stored.pop(checkpoint_id, None)
        saver.writes.pop((thread_id, namespace, checkpoint_id), None)
    forget(saver, thread_id, namespace, checkpoint_ids)
    used = {
        (channel, version)
        for checkpoint, _, _ in stored.values()
        for channel, version in saver.serde.loads_typed(checkpoint)["channel_versions"].items()
    }
    for key in [k for k in saver.blobs if k[:2] == (thread_id, namespace)]:
        if (key[2], key[3]) not in used:
            del saver.blobs[key]


def forget(
    saver: Any,
    thread_id: str,
    namespace: str | None = None,
    checkpoint_ids: Iterable[str] | None = None,
) -> None:
    """Drop what the backend parsed of checkpoints that are deleted: ``checkpoint_ids`` of a
    namespace, or every checkpoint of the thread (``None``). Without it the parsed links and
    versions of deleted threads would stay in a long-running process's memory."""
    forget_histories(saver, thread_id)
    for name in (_LINKS, _VERSIONS):
        cache = saver.__dict__.get(name)
        if not cache:
            continue
        if checkpoint_ids is None:
            for key in [key for key in cache if key[0] == thread_id]:
                del cache[key]
        else:
            for checkpoint_id in checkpoint_ids:
                cache.pop((thread_id, namespace, checkpoint_id), None)
