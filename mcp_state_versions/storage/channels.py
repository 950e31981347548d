"""The two channels the library declares: ``tool_state`` and ``messages``, stored as writes.

Both are LangGraph ``DeltaChannel`` s whose snapshot cadence follows what was written (see
:mod:`mcp_state_versions.storage.tool_state` and :mod:`mcp_state_versions.storage.messages` for the
values they hold and how a stored one is rebuilt). They live apart from those modules because
declaring a channel imports LangGraph's channels and, through them, its runtime: most of a process's
start-up. A graph needs them; a reader of stored state (the command line, the HTTP API's
reads) replays writes through the same reducers and never builds a channel.
"""

from __future__ import annotations

import copy as _copy
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, TypedDict

import ormsgpack
from langchain_core.messages import AnyMessage
from langgraph._internal._typing import MISSING
from langgraph.channels.delta import DeltaChannel
from langgraph.graph.message import add_messages

from ..state.clock import CLOCK_KEY
from ..state.reducer import StateEntry, merge_tool_state, overwritten
from .messages import (
    DEFAULT_MESSAGES_SNAPSHOT_CAP,
    GROWTH,
    MESSAGE_INDEXES,
    MIN_SNAPSHOT_MESSAGES,
    MessagesOption,
    merge_messages,
    replay_messages,
)
from .tool_state import (
    _ENTRY_BYTES,
    BULK_WRITES,
    DEFAULT_SNAPSHOT_FREQUENCY,
    REPLAYS,
    SNAPSHOT_RATIO,
    Reducer,
    batched,
    folded,
    overwrite_of,
)

__all__ = [
    "MessagesChannel",
    "SessionState",
    "ToolStateChannel",
    "make_session_state",
    "messages_channel",
    "tool_state_channel",
]


def _totals(value: Any) -> tuple[int, int] | None:
    """``(writes, written)``: the reducer's running totals in a ``tool_state``'s clock record."""
    record = value.get(CLOCK_KEY) if isinstance(value, Mapping) else None
    if not isinstance(record, Mapping):
        return None
    writes, written = record.get("writes"), record.get("written")
    if type(writes) is int and type(written) is int:
        return writes, written
    return None


def _count(write: Any) -> int:
    """The messages one ``messages`` write holds."""
    return len(write) if isinstance(write, list) else 1


def _counted(writes: Sequence[Any]) -> int:
    """The messages ``writes`` hold: counted by the interpreter's own ``sum`` and ``len``
    where every write is a list (as LangGraph's nodes write them), as a run start late in a
    snapshot cycle counts thousands."""
    if all(map(list.__instancecheck__, writes)):
        return sum(map(len, writes))
    return sum(map(_count, writes))


def _answered(channel: Any, state: Callable[[], tuple[Any, ...]], decide: Callable[[], int]) -> int:
    """A channel's snapshot cadence, the same however often LangGraph asks.

    Deciding moves the channel's base when a snapshot falls due, so a second question would
    get a different answer. LangGraph asks twice at ``durability="exit"``: once to leave out
    the writes a snapshot will hold, once to write that snapshot. Answered "due" and then
    "not due", it stored neither, and the run's writes were lost. So the answer is kept
    beside the state it left (``channel.answered``) and given again while that state holds:
    nothing written since, nothing to decide.
    """
    asked = channel.answered
    if asked is not None and asked[0] == state():
        return int(asked[1])
    answer = decide()
    channel.answered = (state(), answer)
    return answer


class ToolStateChannel(DeltaChannel):  # type: ignore[type-arg]
    """A ``DeltaChannel`` whose snapshot cadence follows what was written, not a step count.

    LangGraph takes a snapshot when a channel's updates since the last one reach its
    ``snapshot_frequency``, which it reads from the live channel once per step. A fixed count
    fits no ``tool_state``: five small values rewritten each turn want a snapshot every few
    turns, five hundred values with two rewritten a turn one every few hundred. So this channel
    answers from what it holds. It knows the reducer's running totals at its seed (the snapshot
    it was rebuilt from, :meth:`from_checkpoint`) and now; a snapshot is due once the writes
    since then reach :data:`SNAPSHOT_RATIO` times the snapshot's own size (what storage costs),
    or ``snapshot_frequency`` key writes (what a run start's replay costs), and then it
    answers 1 (due now) and takes the present as its new base: LangGraph takes the snapshot in
    that step whenever anything was written since the last one, and when nothing was, the last
    one is the present anyway. A step that alone wrote :data:`BULK_WRITES` key writes or more
    and a third of a snapshot's bytes is due too (a tool that published a whole catalogue).
    Otherwise it answers the ``snapshot_frequency`` given, which stays LangGraph's own cap.

    LangGraph reads the cadence once a step, as it writes the step's checkpoint; the totals at
    the previous reading (``seen``) tell what the step wrote.
    """

    __slots__ = ("answered", "base", "measured", "most", "seen")
    answered: tuple[tuple[Any, ...], int] | None
    base: tuple[int, int]
    measured: tuple[int, int] | None
    most: int
    seen: tuple[int, int]

    def _cadence(self) -> int:
        """The cadence, a function of what the channel holds: asked again with nothing
        written since, it answers as it did (:func:`_answered`)."""
        return _answered(self, self._cadence_state, self._decide)

    def _cap(self, most: int) -> None:
        self.most = most
        self.base = self.seen = (0, 0)
        self.measured = None
        self.answered = None

    # A property where LangGraph's DeltaChannel keeps a plain attribute: the cadence is
    # computed from what the channel holds, and setting it sets the cap.
    snapshot_frequency = property(_cadence, _cap)  # type: ignore[assignment]

    def _cadence_state(self) -> tuple[Any, ...]:
        totals = _totals(self.value) if self.value is not MISSING else None
        return (totals, self.base, self.seen, self.measured)

    def _decide(self) -> int:
        totals = _totals(self.value) if self.value is not MISSING else None
        if totals is None:
            return self.most
        writes, written = totals[0] - self.base[0], totals[1] - self.base[1]
        step_writes, step_written = totals[0] - self.seen[0], totals[1] - self.seen[1]
        self.seen = totals
        size = self._size()
        if written >= SNAPSHOT_RATIO * size and self.measured is None:
            size = self._measure()  # the estimate says due: what would it really store?
        if (
            written >= SNAPSHOT_RATIO * size
            or writes >= self.most
            or (step_writes >= BULK_WRITES and 3 * step_written >= size)
        ):
            self.base = totals
            self.measured = None
            return 1
        return self.most

    def _size(self) -> int:
        """About what a snapshot of the present would store, in bytes.

        The reducer's total of value bytes plus :data:`_ENTRY_BYTES` an entry, until a
        snapshot's real size was measured (:meth:`_measure`); from then on that size, plus
        what the value bytes grew by since.
        """
        held = self.value[CLOCK_KEY].get("bytes", 0)
        if self.measured is None:
            return held + _ENTRY_BYTES * len(self.value)
        size, held_then = self.measured
        return size + held - held_then

    def _measure(self) -> int:
        """A snapshot's real size, serialized as the savers store it, measured once a base.

        The per-entry estimate misses rings (a small value rewritten each turn holds eight
        prior versions beside it, each with its stamps): under-counted, the snapshots came
        too often and a turn stored more than twice what it changed. Measuring costs a
        serialization of the state (0.1 ms at 500 × 200 B, 3 ms at 500 × 10 KB), so it is
        done only when the estimate says a snapshot is due, and once until the next one.
        """
        try:
            size = len(ormsgpack.packb(self.value))
        except (TypeError, ValueError):  # a value msgpack cannot take: keep the estimate
            return self._size()
        self.measured = (size, self.value[CLOCK_KEY].get("bytes", 0))
        return size

    def copy(self) -> ToolStateChannel:
        new = self.__class__(self.reducer, self.typ, snapshot_frequency=self.most)
        new.key = self.key
        new.value = self.value if self.value is MISSING else _copy.copy(self.value)
        new.base, new.seen, new.measured = self.base, self.seen, self.measured
        new.answered = self.answered
        return new

    def replay_writes(self, writes: Sequence[Any]) -> None:
        """Stored writes, oldest first, merged as a replay (see :func:`replayed`), from where
        this process's last replay of the same writes left off when there is one
        (:class:`_Replays`)."""
        if not writes:
            return
        fold = getattr(self.reducer, "replayed", None) or self.reducer
        seed = self.value
        # Writes a remembered replay merged held no Overwrite (such a replay is not
        # remembered), so only the rest are looked at: a run start late in a snapshot cycle
        # looks at three writes, not three thousand.
        done, start = REPLAYS.start(fold, seed, writes)
        rest = [write[2] for write in writes[done:]]
        if any(overwrite_of(value)[0] for value in rest):
            # an Overwrite: every write from the seed, as the live channel merged them
            values = [write[2] for write in writes]
            self.value = folded(fold, self.typ() if seed is MISSING else seed, values)
        else:
            self.value = fold(self.typ() if start is MISSING else start, rest)
            REPLAYS.served += done
            REPLAYS.remember(fold, seed, writes, self.value)
        # The next step's writes are counted from here. The replayed ones were written by
        # earlier steps: they count towards the bytes and writes since the seed (``base``),
        # never as one step's (a run start that counted them so took a "catalogue" snapshot
        # every hundred turns or so where the cadence called for one every few hundred).
        self.seen = _totals(self.value) or self.seen

    def update(self, values: Sequence[Any]) -> bool:
        """LangGraph's rules (one ``Overwrite`` a step at most, and it wins the step), except
        that an ``Overwrite`` keeps the turn clock (:func:`~mcp_state_versions.state.reducer.
        overwritten`)."""
        replacing = [found[1] for found in map(overwrite_of, values) if found[0]]
        if len(replacing) != 1:
            return super().update(values)  # none, or several: LangGraph refuses those
        before = self.typ() if self.value is MISSING else self.value
        self.value = overwritten(before, replacing[0], self.reducer)
        return True

    def from_checkpoint(self, checkpoint: Any) -> ToolStateChannel:
        new = super().from_checkpoint(checkpoint)
        new.most = self.most
        new.base = new.seen = _totals(new.value) or (0, 0)
        new.measured = None
        new.answered = None
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
    :func:`~mcp_state_versions.state.reducer.make_session_state` and ``SessionStateMiddleware`` do.
    ``snapshot_frequency`` caps the updates, and the key writes, between snapshots (the bytes
    set the cadence below it; see :data:`DEFAULT_SNAPSHOT_FREQUENCY` for what a larger one
    trades).
    """
    if type(snapshot_frequency) is not int or snapshot_frequency < 1:
        raise ValueError(f"snapshot_frequency must be a positive int, got {snapshot_frequency!r}")
    return Annotated[
        dict[str, Any],
        ToolStateChannel(batched(reducer), dict, snapshot_frequency=snapshot_frequency),
    ]


class MessagesChannel(DeltaChannel):  # type: ignore[type-arg]
    """The ``messages`` channel stored as writes, with snapshots as the list grows.

    LangGraph takes a snapshot when the channel's updates since the last one reach its
    ``snapshot_frequency``, which it reads once a step. This channel answers 1 (due now) once
    the messages written since its base (the snapshot it was rebuilt from, or its last
    answer of 1) reach ``GROWTH - 1`` times the smaller of the list's size then and now, and
    at least :data:`MIN_SNAPSHOT_MESSAGES`: an append-only list snapshots at sizes 16·3ᵏ, a
    list a summary shrank soon after, as the snapshot is small. Otherwise it answers the
    ``snapshot_frequency`` given, which stays LangGraph's cap on a cycle's updates.
    """

    __slots__ = ("answered", "base_size", "most", "written")
    answered: tuple[tuple[Any, ...], int] | None
    base_size: int
    most: int
    written: int

    def _cadence(self) -> int:
        """The cadence, a function of what the channel holds (:func:`_answered`)."""
        return _answered(self, self._cadence_state, self._decide)

    def _cap(self, most: int) -> None:
        self.most = most
        self.base_size = self.written = 0
        self.answered = None

    # A property where LangGraph's DeltaChannel keeps a plain attribute (as for tool_state).
    snapshot_frequency = property(_cadence, _cap)  # type: ignore[assignment]

    def _cadence_state(self) -> tuple[Any, ...]:
        size = None if self.value is MISSING else len(self.value)
        return (size, self.base_size, self.written)

    def _decide(self) -> int:
        if self.value is MISSING:
            return self.most
        size = len(self.value)
        if self.written >= (GROWTH - 1) * max(min(self.base_size, size), MIN_SNAPSHOT_MESSAGES):
            self.base_size, self.written = size, 0
            return 1
        return self.most

    def update(self, values: Sequence[Any]) -> bool:
        changed = super().update(values)
        self.written += _counted(values)
        return changed

    def replay_writes(self, writes: Sequence[Any]) -> None:
        """Stored writes, oldest first, merged as a replay, from where this process's last
        replay of the same writes left off
        (:data:`~mcp_state_versions.storage.tool_state.REPLAYS`)."""
        if not writes:
            return
        values = [write[2] for write in writes]
        self.written += _counted(values)
        seed = self.value
        # As for ``tool_state``: a remembered replay merged no Overwrite, so only the writes
        # after it are looked at, not every write since the snapshot at every run start.
        done, start = REPLAYS.start(replay_messages, seed, writes)
        rest = values[done:]
        last = max((i for i, v in enumerate(rest) if overwrite_of(v)[0]), default=None)
        if last is not None:  # an Overwrite resets the base, as in LangGraph's own replay
            _, value = overwrite_of(rest[last])
            base = list(value) if value is not None else []
            self.value = replay_messages(base, rest[last + 1 :])
            return
        base = self.typ() if start is MISSING else start
        self.value = replay_messages(base, rest) if rest else base
        REPLAYS.served += done
        REPLAYS.remember(replay_messages, seed, writes, self.value, held=len(self.value))
        MESSAGE_INDEXES.replayed(self.value)  # the next run start goes on from it

    def from_checkpoint(self, checkpoint: Any) -> MessagesChannel:
        new = super().from_checkpoint(checkpoint)
        new.most = self.most
        new.base_size = len(new.value) if isinstance(new.value, list) else 0
        new.written = 0
        new.answered = None
        return new

    def copy(self) -> MessagesChannel:
        new = self.__class__(self.reducer, self.typ, snapshot_frequency=self.most)
        new.key = self.key
        if self.value is MISSING:
            new.value = self.value
        else:
            new.value = _copy.copy(self.value)
            MESSAGE_INDEXES.copied(self.value, new.value)
        new.base_size, new.written = self.base_size, self.written
        new.answered = self.answered
        return new

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, MessagesChannel)
            and self.most == other.most
            and self.reducer is other.reducer
        )

    def __hash__(self) -> int:
        return hash((MessagesChannel, self.most, self.reducer))


def messages_channel(messages: MessagesOption = "delta") -> Any:
    """The annotated type of a ``messages`` field: stored as writes (``"delta"``,
    :class:`MessagesChannel` over :func:`merge_messages`) or whole at every checkpoint
    (``"whole"``, LangGraph's ``add_messages``)."""
    if messages == "whole":
        return Annotated[list[AnyMessage], add_messages]
    if messages != "delta":
        raise ValueError(f"messages must be 'delta' or 'whole', got {messages!r}")
    return Annotated[
        list[AnyMessage],
        MessagesChannel(merge_messages, list, snapshot_frequency=DEFAULT_MESSAGES_SNAPSHOT_CAP),
    ]


def make_session_state(
    reducer: Callable[..., dict[str, StateEntry]] = merge_tool_state,
    *,
    snapshot_frequency: int = DEFAULT_SNAPSHOT_FREQUENCY,
    messages: MessagesOption = "delta",
) -> type:
    """Build the graph state schema (``messages`` + ``tool_state``) around a reducer.

    ``tool_state`` is stored as writes with a snapshot every ``snapshot_frequency`` updates
    (:mod:`mcp_state_versions.storage.tool_state`), so what a turn stores grows with what it
    changed. ``messages`` is stored the same way by default
    (:mod:`mcp_state_versions.storage.messages`); ``messages="whole"`` keeps LangGraph's
    ``add_messages`` channel, which stores the whole list at every checkpoint. :data:`SessionState`
    is this with the defaults; build your own for other ring bounds.
    """
    return TypedDict(  # type: ignore[operator]
        "SessionState",
        {
            "messages": messages_channel(messages),
            "tool_state": tool_state_channel(reducer, snapshot_frequency),
        },
    )


SessionState = make_session_state()
"""The graph state schema with the default reducer and both channels stored as writes: pass it
to ``StateGraph`` (see :func:`make_session_state`)."""
