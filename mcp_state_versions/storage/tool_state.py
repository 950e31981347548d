"""How ``tool_state`` is stored: the writes of each step, with a whole snapshot now and then.

A reducer channel (``Annotated[dict, reducer]``) stores its whole value every time it changes.
``tool_state`` changes about three times a turn (the clock opens the turn, a tool writes, the
clock closes it), and its value carries every entry with its ring, so a thread stored the whole
session state three times a turn, although a turn usually changes a value or two.

LangGraph's ``DeltaChannel`` stores the writes instead: each step's writes already go to the
saver's writes table, the checkpoint holds no value, and the value is rebuilt by replaying the
writes since the nearest snapshot (a whole value written every ``snapshot_frequency`` updates)
through the reducer. That is sound only for a reducer that is deterministic and
batching-invariant, ``r(r(s, xs), ys) == r(s, xs + ys)``; :func:`~mcp_state_versions.state.reducer.
make_merge_tool_state` is built to be, and its property tests check it.

This module is the one place that knows that shape:

* :func:`~mcp_state_versions.storage.channels.tool_state_channel` declares the channel (the default
  for every graph schema the library builds), in :mod:`mcp_state_versions.storage.channels`, which
  only a graph imports;
* :func:`stored_value` reads what a checkpoint holds for it: a snapshot, a whole value written
  by the previous release (whole-value blobs; such threads read right and go on being written,
  their lineage mixed: whole values first, writes after), or nothing (rebuild from writes);
* :func:`replay` rebuilds a value from a seed and the writes after it, as LangGraph does at the
  start of every run, for the checkpoint walk and retention.

The delta format is beta upstream: ``pyproject.toml`` pins the LangGraph range the tests
cover, and the README says what an upgrade needs.
"""

from __future__ import annotations

import operator
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from langgraph._internal._constants import OVERWRITE
from langgraph.checkpoint.serde.types import _DeltaSnapshot

from ..state.clock import CLOCK_KEY
from ..state.reducer import REDUCERS, ToolStateReducer, overwritten, reducer_for

__all__ = [
    "BULK_WRITES",
    "DEFAULT_SNAPSHOT_FREQUENCY",
    "NOTHING_STORED",
    "REPLAYS",
    "REPLAY_MEMORY",
    "REPLAY_MEMORY_BYTES",
    "SNAPSHOT_RATIO",
    "Reducer",
    "batched",
    "folded",
    "overwrite_of",
    "replay",
    "replayed",
    "snapshot",
    "stored_value",
]

Reducer = Callable[[Mapping[str, Any] | None, Mapping[str, Any] | None], dict[str, Any]]

DEFAULT_SNAPSHOT_FREQUENCY = 3000
"""The most updates of ``tool_state`` (about three a turn), and the most key writes, between whole
snapshots.

Within it, the cadence follows what was written (:class:`ToolStateChannel`). Every snapshot
stores the whole session state once, so a rarer one stores less per turn. Every run starts by
rebuilding ``tool_state`` from the last snapshot and the writes since; a process that ran the
thread's last run start reads and merges only the writes since then (the savers' remembered
delta history, :func:`~mcp_state_versions.backends.known_history`, and :data:`REPLAYS`), so in a
running service a rarer snapshot costs a run start nothing more. What it does cost is the first
run start after a restart, and a read beyond the ring, which replay the writes from the snapshot
(20–35 µs a small write, read and merged, measured). Many small values rewritten a few at a time
are where this cap decides: at 500 × 200 B with two rewritten a turn, the byte rule alone would
take a snapshot about every 975 turns, this cap takes one every 1,000, and a turn stores about
1.8 times the bytes it changed (at 1,000 updates it was every 333 turns and 2.6 times); the
first run start after a restart then reads and replays up to 3,000 writes: 43–85 ms in memory,
61–115 ms on SQLite and 86–140 ms on PostgreSQL over three full runs of ``python -m
benchmarks`` (README), once per thread and process."""

SNAPSHOT_RATIO = 3
"""Bytes written since the last snapshot, as a multiple of a snapshot's size, that call for the
next: a turn then stores its writes plus at most a third as much again in snapshots. A smaller
ratio stores more and replays less at a run start: at 5 × 200 B, with two values rewritten a
turn, 3 is a snapshot every 34 turns or so, a turn storing 1.8 times the bytes it changed (4
stored 1.7 times and replayed a third more). The replay this allows is bounded by the
``snapshot_frequency`` cap for small values; for large ones it costs about what writing them
did, since a replay does not serialize a value its writer gave the identity of (measured at 5
and 50 × 200 KB: a run start's load stays well under a plain agent's turn, which stores its
whole dict at every step)."""

BULK_WRITES = 64
"""Key writes in one step that, with at least a third of a snapshot's bytes, call for a
snapshot at once. Each write since the last snapshot is replayed at every run start (about
12 µs a small write, measured), so a tool publishing hundreds of values would otherwise add
milliseconds to every run until the bytes or the count rule called the next snapshot, hundreds
of turns later; taken then, the snapshot costs at most three times what that one step wrote (a
snapshot holds each entry's stamps beside its value, which a write does not)."""

_ENTRY_BYTES = 160
"""About what a stored entry adds to its values' bytes (key, digest, counters, ring items)."""

NOTHING_STORED: Any = object()
"""What :func:`stored_value` returns when a checkpoint holds no value for the channel: it is
rebuilt from the writes of its ancestors (see :func:`replay`)."""


@lru_cache(maxsize=4 * REDUCERS)
def batched(reducer: Reducer) -> Callable[[Any, Sequence[Any]], dict[str, Any]]:
    """The reducer in ``DeltaChannel``'s form, ``(state, [update, ...]) -> state``.

    One function object per reducer (cached; :data:`~mcp_state_versions.state.reducer.REDUCERS`
    times four, as many as a process declares and reads with), so two schemas declaring the
    same reducer declare equal channels, which LangGraph requires when it merges state schemas
    (``create_agent`` merges every middleware's).
    """
    return _folding(reducer, replaying=False)


@lru_cache(maxsize=4 * REDUCERS)
def replayed(reducer: Reducer) -> Callable[[Any, Sequence[Any]], dict[str, Any]]:
    """:func:`batched` for stored writes being replayed (a run start, a read of the past).

    Every stored write on a checkpoint's chain was merged live, by the checking reducer, before
    the checkpoint it led to existed, so a replay takes their shape and the identity their
    writer gave as they are: a run start replays up to a thousand writes, and validating and
    serializing each one again was most of its cost. The result is the one the live merges
    produced.
    """
    return _folding(reducer, replaying=True)


def _folding(
    reducer: Reducer, *, replaying: bool
) -> Callable[[Any, Sequence[Any]], dict[str, Any]]:
    # A reducer built by make_merge_tool_state can merge a batch into a dict it is handed: the
    # batch is then one copy of the state and O(1) work per write, as if merged one by one.
    into = reducer.merge_all if isinstance(reducer, ToolStateReducer) else None

    def fold(state: Any, updates: Sequence[Any]) -> dict[str, Any]:
        if into is not None:
            merged = reducer(state, None)  # a fresh copy: the state passed in is not changed
            return into(merged, updates, replayed=replaying)
        merged = {} if state is None else state
        for update in updates:
            merged = reducer(merged, update)
        return merged

    fold.__name__ = fold.__qualname__ = f"batched_{getattr(reducer, '__name__', 'reducer')}"
    fold.__doc__ = f"{reducer.__doc__ or 'The tool_state reducer'}, over a batch of updates."
    if not replaying:
        fold.replayed = replayed(reducer)  # type: ignore[attr-defined]
    return fold


REPLAY_MEMORY = 256
"""Chains of stored writes whose last replay this process remembers (:class:`_Replays`): a
thread's ``tool_state`` and its ``messages`` are one chain each, so a process serving up to
128 conversations at once resumes each one's replay (at 32, one serving 50 replayed each
thread's writes since its snapshot at every run start)."""

REPLAY_MEMORY_BYTES = 8 * 1024 * 1024
"""The most value bytes a remembered replay's state may hold (the default budget)."""


@dataclass(frozen=True, slots=True)
class _Replay:
    """One replay: the seed and the stored writes merged into it, and what they made."""

    seed: Any
    writes: tuple[Any, ...]
    value: dict[str, Any]


class _Replays:
    """The last replay of each chain of stored writes, in this process.

    Every run starts by rebuilding ``tool_state`` from the nearest snapshot and every write
    stored since it, and the next run on the thread replays the same writes again, plus the
    three or so the last run added: between two snapshots a thread's run starts merge the same
    writes over and over, each time more of them. A replay is a pure function of its seed and
    its writes (the reducer is deterministic), so a replay whose seed and leading writes are
    those of one remembered here starts from that one's result and merges only the rest.

    Remembered replays are found by the first write's task id, and used only when the seed and
    every leading write are the ones remembered (the same objects, as a saver's remembered
    delta history hands back, or else equal: ``==`` costs a fraction of merging them): a task
    id names the checkpoint it ran from, and savers keep the first writes stored for a task,
    but a cache that trusted ids alone would be one more place where a reload could differ
    from what was stored. What a replay returns is a fresh dict, as
    without this, and the library never changes an entry in place, so a remembered state is
    never changed by the runs that start from it. Bounded by :data:`REPLAY_MEMORY` chains and
    :data:`REPLAY_MEMORY_BYTES` a state; nothing is remembered across processes.
    """

    def __init__(self, size: int = REPLAY_MEMORY) -> None:
        self.size = size
        self.served = 0  #: writes a replay took from memory instead of merging (for tests)
        self._found: OrderedDict[tuple[Any, str], _Replay] = OrderedDict()
        self._lock = threading.Lock()

    def start(self, fold: Any, seed: Any, writes: Sequence[Any]) -> tuple[int, Any]:
        """``(n, state)``: the first ``n`` of ``writes`` merged into ``seed`` make ``state``
        (``(0, seed)`` when no remembered replay fits)."""
        with self._lock:
            found = self._found.get((fold, writes[0][0]))
        if found is None or len(found.writes) > len(writes):
            return 0, seed
        count = len(found.writes)
        if (found.seed is not seed and found.seed != seed) or not _same_writes(
            writes[:count], found.writes
        ):
            return 0, seed
        return count, found.value

    def remember(
        self, fold: Any, seed: Any, writes: Sequence[Any], value: Any, held: int | None = None
    ) -> None:
        """Remember that ``writes`` merged into ``seed`` make ``value``; ``held``: its value
        bytes where the value does not record them (a ``tool_state``'s clock record does)."""
        if held is None:
            record = value.get(CLOCK_KEY)
            held = record.get("bytes", 0) if isinstance(record, Mapping) else 0
        if self.size <= 0 or not isinstance(held, int) or held > REPLAY_MEMORY_BYTES:
            return
        replay = _Replay(seed=seed, writes=tuple(writes), value=value)
        key = (fold, writes[0][0])
        with self._lock:
            kept = self._found.get(key)
            if (
                kept is None
                or len(kept.writes) < len(replay.writes)
                or any(a[0] != b[0] for a, b in zip(kept.writes, replay.writes, strict=False))
            ):
                # A replay of writes the remembered one goes on from (an older checkpoint
                # of the same chain, as a history walk reads them) would only shorten it.
                self._found[key] = replay
            self._found.move_to_end(key)
            while len(self._found) > self.size:
                self._found.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._found.clear()


REPLAYS = _Replays()


def _same_writes(writes: Sequence[Any], found: Sequence[Any]) -> bool:
    """Whether stored writes are the ones a remembered replay merged: the same task ids and
    equal values. A saver that remembered its delta history hands back the very write objects
    it handed out before, which one identity check over the lot (in C) confirms; only writes
    read again from storage are compared value by value."""
    if all(map(operator.is_, writes, found)):
        return True
    return all(
        write[0] == kept[0] and (write[2] is kept[2] or write[2] == kept[2])
        for write, kept in zip(writes, found, strict=True)
    )


def overwrite_of(value: Any) -> tuple[bool, Any]:
    """``(True, replacement)`` for a write that replaces a channel's value (LangGraph's
    ``Overwrite``, or either of the dict forms it stands for across JSON), ``(False, None)``
    for any other write: LangGraph's own test, asked without importing ``langgraph.types``.

    That module imports LangGraph's runtime, most of a process's start-up, and a reader of
    stored state (the command line) needs none of it. An ``Overwrite`` can exist only once
    its module is imported, so until then only the dict forms are looked at (a test checks
    this agrees with LangGraph's on every form)."""
    types = sys.modules.get("langgraph.types")
    if types is not None and isinstance(value, types.Overwrite):
        return True, value.value
    if isinstance(value, dict):
        if len(value) == 1 and OVERWRITE in value:
            return True, value[OVERWRITE]
        if value.get("type") == OVERWRITE and "value" in value:
            return True, value["value"]
    return False, None


def folded(fold: Callable[[Any, Sequence[Any]], Any], seed: Any, updates: Sequence[Any]) -> Any:
    """``seed`` after stored ``updates`` (oldest first), each ``Overwrite`` among them applied
    as the live channel applied it (:meth:`ToolStateChannel.update`), the updates between them
    merged by ``fold``."""
    state, pending = seed, []
    for value in updates:
        replacing, replacement = overwrite_of(value)
        if not replacing:
            pending.append(value)
            continue
        state = overwritten(fold(state, pending) if pending else state, replacement, fold)
        pending = []
    return fold(state, pending) if pending else state


def stored_value(value: Any) -> Any:
    """What a checkpoint's stored ``tool_state`` is: the value, or :data:`NOTHING_STORED`.

    A snapshot is unwrapped; a plain dict (a whole value, as the previous release and plain
    reducer channels store it) is the value itself; ``None`` or an absent value means the
    checkpoint holds the channel as writes.
    """
    if isinstance(value, _DeltaSnapshot):
        return value.value
    if value is None or value is NOTHING_STORED:
        return NOTHING_STORED
    return value


def snapshot(value: Any) -> Any:
    """A whole value (``tool_state``'s dict, or ``messages``' list) in the form a checkpoint
    stores a snapshot in (for retention, which must leave the oldest checkpoint it keeps able
    to rebuild without its deleted ancestors)."""
    return _DeltaSnapshot(list(value) if isinstance(value, list) else dict(value))


def replay(seed: Any, updates: Iterable[Any], reducer: Reducer | None = None) -> dict[str, Any]:
    """The value after ``updates`` (oldest first) were merged into ``seed``.

    ``seed`` may be a snapshot, a whole value or ``None`` (the thread's start). ``reducer`` is
    the graph's; ``None`` uses one with the ring and budget the state records (the reducer
    writes its bounds into the clock record, and the first tick of a thread carries them), so a
    reader that does not know the graph (the HTTP API, the command line) rebuilds what the
    graph held.
    """
    value = stored_value(seed)
    state: dict[str, Any] = {} if value is NOTHING_STORED else dict(value)
    updates = list(updates)
    if not updates:
        return state
    # The bounds the state records, or else the first tick's.
    merge = reducer if reducer is not None else reducer_for(state, updates[0])
    return folded(replayed(merge), state, updates)
