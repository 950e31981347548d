"""Known histories: the delta history of ``tool_state`` a process remembers, per thread, and
what its saver stored since, so a run start needs no read of its own.

Every run start rebuilds ``tool_state`` from its delta history (the seed and the writes since
the last snapshot). A checkpoint's history is fixed once the checkpoint exists: the writes at a
checkpoint are those of the step after it, and the chain below it never changes. So a process
keeps the history it last read at a run start (:func:`known_history`); a later read that comes
up the parents to that checkpoint reads only the writes above it.

What the process then stores itself it need not read back at all. The library's savers tell
this module each checkpoint they put (:func:`note_checkpoint`: its parent, and whether it holds
a delta counter) and each ``tool_state`` write (:func:`note_writes`: its task, position and
value, decoded from the bytes the saver stored, so it is what a read would give). At the next
run start, :func:`caught_up` extends the remembered history along those checkpoints to the one
the run starts from, without a statement: on PostgreSQL and SQLite that is the read a plain
agent does not make, and it was most of what separated a library turn from one.

It extends only where it knows every write. A checkpoint's writes are all seen only when the
process put the checkpoint while it kept the thread's history (it is *born tracked*): writes at
a checkpoint found by a read may predate the read (an interrupted step's). So the history is
extended from a remembered checkpoint that was born tracked, through checkpoints that were,
each holding a delta counter (one without a counter ends a chain, and its stored value is not
kept here). Anything else, another process's checkpoints included, is read from storage as
before; the first run start after a snapshot reads once, and the ones after it read nothing.

Writes are noted after the saver stored them, and extending happens only at a run start, the
moment a read from storage would remember a history too: what is noted by then is what storage
holds by then.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from langgraph.checkpoint.base import writes_sort_key

from ..storage.messages import MESSAGES

TOOL_STATE = "tool_state"
CHANNELS = (TOOL_STATE, MESSAGES)
"""The delta channels whose histories are remembered: each is kept per thread namespace on
its own, as each has its own snapshots."""

KNOWN_BYTES = 64 * 1024 * 1024
"""The stored bytes of writes a saver's remembered delta histories may hold together, and
separately the bytes of the writes it noted since; the least recently read give way first, and
the one just read is always kept (the snapshot cadence bounds it: writes since a snapshot stay
within a few times the state's size)."""

_KNOWN = "_mcp_state_versions_known_histories"
_KNOWN_LOCK = threading.Lock()


class Known(NamedTuple):
    """A remembered delta history (:func:`known_history`).

    ``counted``: whether the checkpoint holds a delta counter (a chain read past it goes on
    to its parent); ``None`` where the read did not say. ``tracked``: whether the process put
    the checkpoint itself while keeping the thread's history, so every write at it was noted
    (see the module's docstring)."""

    checkpoint_id: str
    history: Mapping[str, Any]
    stored_bytes: int
    counted: bool | None = None
    tracked: bool = False

    def copied(self) -> dict[str, Any]:
        """The history as a dict of its own, whose ``writes`` a caller may extend: the
        remembered one is handed to every later read and never changed."""
        return {**self.history, "writes": list(self.history["writes"])}


class _Written:
    """What a saver stored for one thread namespace while it kept the thread's history: the
    checkpoints it put (``born``: id to parent and whether it holds a delta counter), and the
    ``tool_state`` writes at any checkpoint (id to ``(task_id, position)`` to task path, value
    and stored bytes; the first one stored for a position stays, as in the savers)."""

    def __init__(self) -> None:
        self.born: dict[str, tuple[str, bool]] = {}
        self.writes: dict[str, dict[tuple[str, int], tuple[str, Any, int]]] = {}
        self.newest: str | None = None
        self.bytes = 0

    def drop_writes(self, checkpoint_id: str) -> None:
        for _, _, size in self.writes.pop(checkpoint_id, {}).values():
            self.bytes -= size


class _Remembered:
    """A saver's remembered histories, least recently read first, and their stored bytes
    together (kept as they change, so a run start does not add them all up again); and what it
    stored since each (:class:`_Written`)."""

    def __init__(self) -> None:
        self.entries: dict[tuple[str, str, str], Known] = {}
        self.written: dict[tuple[str, str, str], _Written] = {}
        self.total = 0

    def put(self, key: tuple[str, str, str], known: Known) -> None:
        self._take(key)
        while self.entries and self.total + known.stored_bytes > KNOWN_BYTES:
            self.pop(next(iter(self.entries)))  # dicts keep insertion order
        self.entries[key] = known
        self.total += known.stored_bytes

    def _take(self, key: tuple[str, str, str]) -> None:
        found = self.entries.pop(key, None)
        if found is not None:
            self.total -= found.stored_bytes

    def pop(self, key: tuple[str, str, str]) -> None:
        self._take(key)
        self.written.pop(key, None)


def _remembered(saver: Any) -> _Remembered | None:
    return saver.__dict__.get(_KNOWN)


def known_history(
    saver: Any, thread_id: str, namespace: str, channel: str = TOOL_STATE
) -> Known | None:
    """The delta history of ``channel`` this process last read (or extended) at a run start
    of the thread, or ``None``; see the module's docstring."""
    with _KNOWN_LOCK:
        remembered = _remembered(saver)
        key = (thread_id, namespace, channel)
        return None if remembered is None else remembered.entries.get(key)


def remember_history(
    saver: Any,
    thread_id: str,
    namespace: str,
    checkpoint_id: str,
    history: Mapping[str, Any],
    stored_bytes: int,
    *,
    counted: bool | None = None,
    channel: str = TOOL_STATE,
) -> None:
    """Remember ``history`` as ``checkpoint_id``'s (see :func:`known_history`), within
    :data:`KNOWN_BYTES` with the others. What the saver stored since is kept where the
    checkpoint was born tracked (its writes were all noted), and otherwise starts afresh from
    it. ``counted`` left ``None`` is what the saver noted of the checkpoint, where it did."""
    key = (thread_id, namespace, channel)
    with _KNOWN_LOCK:
        remembered: _Remembered = saver.__dict__.setdefault(_KNOWN, _Remembered())
        written = remembered.written.get(key)
        tracked = written is not None and checkpoint_id in written.born
        if written is None or not tracked:
            remembered.written[key] = _Written()
        else:
            if counted is None:
                counted = written.born[checkpoint_id][1]
            _forget_ancestors(written, checkpoint_id)
        known = Known(checkpoint_id, dict(history), stored_bytes, counted, tracked)
        remembered.put(key, known)


def remembers_run_starts(saver: Any) -> bool:
    """Whether ``saver``'s run starts read ``tool_state``'s history through this package and
    remember it (:func:`known_history`): the library's savers
    (:mod:`mcp_state_versions.savers`) say so with a class attribute, and the database ones
    among them also note what they store (:func:`note_checkpoint`). Only for such a saver is a
    history read ahead of a run (:meth:`~mcp_state_versions.backends.Backend.run_start`) one
    the run then uses."""
    return getattr(saver, "remembers_run_starts", False) is True


def forget_histories(saver: Any, thread_id: str | None = None) -> None:
    """Drop the remembered histories of ``thread_id`` (every thread: ``None``), and what was
    noted since, as a thread's deletion or a prune changes what its checkpoints are."""
    with _KNOWN_LOCK:
        remembered = _remembered(saver)
        if remembered is not None:
            for key in [k for k in remembered.entries if thread_id is None or k[0] == thread_id]:
                remembered.pop(key)


def note_checkpoint(
    saver: Any,
    thread_id: str,
    namespace: str,
    checkpoint_id: str,
    parent_id: str | None,
    metadata: Mapping[str, Any],
) -> None:
    """A saver is about to store ``checkpoint_id`` (child of ``parent_id``) with ``metadata``:
    it is born tracked when its parent is the remembered checkpoint or one born tracked.
    Called before the checkpoint is stored, so that no write at it is stored unnoted."""
    counters = metadata.get("counters_since_delta_snapshot") or {}
    with _KNOWN_LOCK:
        remembered = _remembered(saver)
        if remembered is None:
            return
        for channel in CHANNELS:
            key = (thread_id, namespace, channel)
            if key not in remembered.entries:
                continue
            counted = isinstance(counters, Mapping) and counters.get(channel) is not None
            written = remembered.written.setdefault(key, _Written())
            known = remembered.entries[key]
            if parent_id is not None and (
                parent_id == known.checkpoint_id or parent_id in written.born
            ):
                written.born[checkpoint_id] = (parent_id, counted)
                written.newest = checkpoint_id


def note_writes(
    saver: Any,
    thread_id: str,
    namespace: str,
    checkpoint_id: str,
    writes: Sequence[tuple[str, Any]],
    task_id: str,
    task_path: str,
) -> None:
    """A saver stored ``writes`` of ``task_id`` at ``checkpoint_id``: note those of each
    remembered channel, decoded from the bytes its serializer makes (what a read would give),
    at the position the saver gives them (their index among the task's writes). Nothing is
    done for a thread whose history this process does not keep."""
    for channel in {channel for channel, _ in writes if channel in CHANNELS}:
        _note_channel_writes(
            saver, (thread_id, namespace, channel), checkpoint_id, writes, task_id, task_path
        )


def _note_channel_writes(
    saver: Any,
    key: tuple[str, str, str],
    checkpoint_id: str,
    writes: Sequence[tuple[str, Any]],
    task_id: str,
    task_path: str,
) -> None:
    with _KNOWN_LOCK:
        remembered = _remembered(saver)
        if remembered is None or key not in remembered.entries:
            return
    serde = saver.serde
    found = []
    for index, (channel, value) in enumerate(writes):
        if channel == key[2]:
            stored = serde.dumps_typed(value)
            found.append((index, serde.loads_typed(stored), len(stored[1] or b"")))
    with _KNOWN_LOCK:
        remembered = _remembered(saver)
        written = None if remembered is None else remembered.written.get(key)
        if written is None:
            return
        at = written.writes.setdefault(checkpoint_id, {})
        for index, value, size in found:
            if (task_id, index) not in at:
                at[task_id, index] = (task_path, value, size)
                written.bytes += size
        if remembered is not None and written.bytes > KNOWN_BYTES:  # written far past a read
            remembered.written[key] = _Written()
            known = remembered.entries.get(key)
            if known is not None:  # its writes from here on are no longer all noted
                remembered.entries[key] = known._replace(tracked=False)


def caught_up(
    saver: Any, thread_id: str, namespace: str, target: str | None, channel: str = TOOL_STATE
) -> Known | None:
    """``channel``'s remembered history extended to ``target`` (``None``: the newest
    checkpoint this saver put on the thread) from what was noted, remembered in its place;
    ``None`` where the notes do not reach it (see the module's docstring), and a read is
    needed."""
    key = (thread_id, namespace, channel)
    with _KNOWN_LOCK:
        remembered = _remembered(saver)
        known = None if remembered is None else remembered.entries.get(key)
        written = None if remembered is None else remembered.written.get(key)
        if known is None or written is None:
            return None
        target = target or written.newest
        if target is None:
            return None
        if target == known.checkpoint_id:
            return known
        if not (known.tracked and known.counted):
            return None
        path = []  # target's ancestors up to the remembered checkpoint, newest first
        node = target
        while node != known.checkpoint_id:
            link = written.born.get(node)
            if link is None:
                return None
            node = link[0]
            if node != known.checkpoint_id:
                path.append(node)
        if not all(written.born[ancestor][1] for ancestor in path):
            return None
        history = known.copied()
        size = known.stored_bytes
        for checkpoint_id in [known.checkpoint_id, *reversed(path)]:
            at = written.writes.get(checkpoint_id, {})
            ordered = sorted(at.items(), key=lambda w: writes_sort_key(w[1][0], *w[0]))
            history["writes"] += [(task, channel, value) for (task, _), (_, value, _) in ordered]
            size += sum(stored for _, _, stored in at.values())
        counted = written.born[target][1]
        _forget_ancestors(written, target)
        extended = Known(target, history, size, counted, True)
        remembered.put(key, extended)  # type: ignore[union-attr]
        return extended


def _forget_ancestors(written: _Written, checkpoint_id: str) -> None:
    """Drop what was noted at ``checkpoint_id``'s born-tracked ancestors: its remembered history
    holds their writes now."""
    link = written.born.get(checkpoint_id)
    node = None if link is None else link[0]
    while node is not None:
        written.drop_writes(node)
        link = written.born.pop(node, None)
        node = link[0] if link is not None else None


def note_read(
    saver: Any, where: tuple[str, str, str], pending: Sequence[tuple[str, str, Any]]
) -> None:
    """A saver read checkpoint ``where`` (thread, namespace, id) as a run's start, holding the
    writes ``pending``: if any is of a remembered channel and this process did not note it,
    forget the thread's remembered histories.

    A checkpoint this process put is born tracked, but it is not the process's alone: another
    process may resume an interrupted task there (or an exit-mode run store its writes there),
    and those writes would be missing from every history extended from the notes. A run that
    continues such a checkpoint reads it first, which shows them; the next run start then
    reads from storage.
    """
    thread_id, namespace, checkpoint_id = where
    with _KNOWN_LOCK:
        remembered = _remembered(saver)
        if remembered is None or not pending:
            return
        unnoted = False
        for channel in CHANNELS:
            written = remembered.written.get((thread_id, namespace, channel))
            known = remembered.entries.get((thread_id, namespace, channel))
            if written is None or known is None:
                continue
            if checkpoint_id not in written.born and checkpoint_id != known.checkpoint_id:
                continue  # not extended through: its writes are read from storage anyway
            noted = {task for task, _ in written.writes.get(checkpoint_id, {})}
            unnoted = unnoted or any(ch == channel and t not in noted for t, ch, _ in pending)
    if unnoted:
        forget_histories(saver, thread_id)
