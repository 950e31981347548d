"""How ``tool_state`` is stored: the writes of each step, with a whole snapshot now and then.

A reducer channel (``Annotated[dict, reducer]``) stores its whole value every time it changes.
``tool_state`` changes about three times a turn (the clock opens the turn, a tool writes, the
clock closes it), and its value carries every entry with its ring, so a thread stored the whole
session state three times a turn, although a turn usually changes a value or two.

LangGraph's ``DeltaChannel`` stores the writes instead: each step's writes already go to the
saver's writes table, the checkpoint holds no value, and the value is rebuilt by replaying the
writes since the nearest snapshot (a whole value written every ``snapshot_frequency`` updates)
through the reducer. That is sound only for a reducer that is deterministic and
batching-invariant, ``r(r(s, xs), ys) == r(s, xs + ys)``; :func:`~mcp_state_versions.state.
make_merge_tool_state` is built to be, and its property tests check it.

This module is the one place that knows that shape:

* :func:`tool_state_channel` declares the channel (the default for every graph schema the
  library builds);
* :func:`stored_value` reads what a checkpoint holds for it: a snapshot, a whole value written
  by the previous release (whole-value blobs; such threads read right and go on being written,
  their lineage mixed: whole values first, writes after), or nothing (rebuild from writes);
* :func:`replay` rebuilds a value from a seed and the writes after it, as LangGraph does at the
  start of every run, for the checkpoint walk and retention.

The delta format is beta upstream: ``pyproject.toml`` pins the LangGraph range the tests
cover, and the README says what an upgrade needs.
"""

from __future__ import annotations

import copy as _copy
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import cache
from typing import Annotated, Any

from langgraph._internal._typing import MISSING
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.serde.types import _DeltaSnapshot

__all__ = [
    "DEFAULT_SNAPSHOT_FREQUENCY",
    "NOTHING_STORED",
    "SNAPSHOT_RATIO",
    "Reducer",
    "ToolStateChannel",
    "batched",
    "replay",
    "snapshot",
    "stored_value",
    "tool_state_channel",
]

Reducer = Callable[[Mapping[str, Any] | None, Mapping[str, Any] | None], dict[str, Any]]

DEFAULT_SNAPSHOT_FREQUENCY = 256
"""The most updates of ``tool_state`` (about three a turn) between whole snapshots.

Within it, the cadence follows the bytes (:class:`ToolStateChannel`): a snapshot is taken once
the writes since the last one add up to :data:`SNAPSHOT_RATIO` times the snapshot's own size.
Every snapshot stores the whole session state once, so a rarer one stores less per turn; every
run starts by replaying the writes since the last snapshot, and every read beyond the ring
replays them for the turn it reads, so a rarer one costs more time. Measured in
``python -m benchmarks`` (README)."""

SNAPSHOT_RATIO = 2
"""Writes since the last snapshot, as a multiple of a snapshot's size, that call for the next.

A turn then stores its writes plus at most half their size again in snapshots, and a replay
reads at most twice what one snapshot holds."""

_ENTRY_BYTES = 160
"""About what a stored entry adds to its values' bytes (key, digest, counters, ring items)."""

NOTHING_STORED: Any = object()
"""What :func:`stored_value` returns when a checkpoint holds no value for the channel: it is
rebuilt from the writes of its ancestors (see :func:`replay`)."""


@cache
def batched(reducer: Reducer) -> Callable[[Any, Sequence[Any]], dict[str, Any]]:
    """The reducer in ``DeltaChannel``'s form, ``(state, [update, ...]) -> state``.

    One function object per reducer (cached), so two schemas declaring the same reducer declare
    equal channels, which LangGraph requires when it merges state schemas (``create_agent``
    merges every middleware's).
    """

    def fold(state: Any, updates: Sequence[Any]) -> dict[str, Any]:
        merged = {} if state is None else state
        for update in updates:
            merged = reducer(merged, update)
        return merged

    fold.__name__ = fold.__qualname__ = f"batched_{getattr(reducer, '__name__', 'reducer')}"
    fold.__doc__ = f"{reducer.__doc__ or 'The tool_state reducer'}, over a batch of updates."
    return fold


class ToolStateChannel(DeltaChannel):  # type: ignore[type-arg]
    """A ``DeltaChannel`` whose snapshot cadence follows the bytes written, not the updates.

    LangGraph takes a snapshot when a channel's updates since the last one reach its
    ``snapshot_frequency``. A fixed count fits no ``tool_state``: a state of five small values
    rewritten whole each turn wants a snapshot every few updates, one of five hundred large
    values with two rewritten a turn wants one every few hundred. So the count is read from the
    value itself: the snapshot's size (the JSON bytes the entries hold, from the reducer's
    totals) times :data:`SNAPSHOT_RATIO`, over the bytes a write has taken on average. (The
    reducer counts writes per key, which keeps its totals the same however writes are batched;
    LangGraph counts steps, of which there are at most as many, so the writes since a snapshot
    reach at least that multiple.) It is a pure function of the value, capped by the
    ``snapshot_frequency`` given.
    """

    __slots__ = ("most",)

    @property  # type: ignore[override]
    def snapshot_frequency(self) -> int:
        value = self.value
        record = value.get("__clock__") if isinstance(value, Mapping) else None
        if not isinstance(record, Mapping):
            return self.most
        writes, written = record.get("writes"), record.get("written")
        held = record.get("bytes", 0)
        if not (type(writes) is int and type(written) is int and writes > 0 and written > 0):
            return self.most
        size = held + _ENTRY_BYTES * len(value)
        return max(1, min(self.most, (SNAPSHOT_RATIO * size * writes) // written))

    @snapshot_frequency.setter
    def snapshot_frequency(self, most: int) -> None:
        self.most = most

    def copy(self) -> ToolStateChannel:
        new = self.__class__(self.reducer, self.typ, snapshot_frequency=self.most)
        new.key = self.key
        new.value = self.value if self.value is MISSING else _copy.copy(self.value)
        return new

    def from_checkpoint(self, checkpoint: Any) -> ToolStateChannel:
        new = super().from_checkpoint(checkpoint)
        new.most = self.most
        return new

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, ToolStateChannel)
            and self.most == other.most
            and self.reducer is other.reducer
        )

    def __hash__(self) -> int:
        return hash((ToolStateChannel, self.most, self.reducer))


def tool_state_channel(
    reducer: Reducer, snapshot_frequency: int = DEFAULT_SNAPSHOT_FREQUENCY
) -> Any:
    """The annotated type of a ``tool_state`` field stored as writes (:class:`ToolStateChannel`).

    Use it as a state schema's field type, ``tool_state: tool_state_channel(reducer)``;
    :func:`~mcp_state_versions.state.make_session_state` and ``SessionStateMiddleware`` do.
    ``snapshot_frequency`` caps the updates between snapshots (the bytes set the cadence
    below it).
    """
    if type(snapshot_frequency) is not int or snapshot_frequency < 1:
        raise ValueError(f"snapshot_frequency must be a positive int, got {snapshot_frequency!r}")
    return Annotated[
        dict[str, Any],
        ToolStateChannel(batched(reducer), dict, snapshot_frequency=snapshot_frequency),
    ]


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


def snapshot(value: Mapping[str, Any]) -> Any:
    """A whole value in the form a checkpoint stores a snapshot in (for retention, which must
    leave the oldest checkpoint it keeps able to rebuild without its deleted ancestors)."""
    return _DeltaSnapshot(dict(value))


def replay(seed: Any, updates: Iterable[Any], reducer: Reducer | None = None) -> dict[str, Any]:
    """The value after ``updates`` (oldest first) were merged into ``seed``.

    ``seed`` may be a snapshot, a whole value or ``None`` (the thread's start). ``reducer`` is
    the graph's; ``None`` uses one with the ring and budget the state records (the reducer
    writes its bounds into the clock record, and the first tick of a thread carries them), so a
    reader that does not know the graph (the HTTP API, the command line) rebuilds what the
    graph held.
    """
    from .state import reducer_for

    value = stored_value(seed)
    state: dict[str, Any] = {} if value is NOTHING_STORED else dict(value)
    merge = reducer
    for update in updates:
        if merge is None:  # the bounds the state records, or else the first tick's
            merge = reducer_for(state, update)
        state = merge(state, update)
    return state
