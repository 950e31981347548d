"""What a host can tell the library about a thread's past, and what a read of it can answer.

The library knows entries, keys and turns. It does not know what a checkpoint is, which saver
holds them, or how retention works; :class:`ThreadHistory` is the whole of what it asks a host
for, in its own vocabulary. :class:`mcp_state_versions.walk.checkpoints.CheckpointHistory`
implements it over any LangGraph checkpointer; a host with another store implements it
directly.

The answers a read can give (:data:`TurnAnswer`, resolved in :mod:`mcp_state_versions.walk.resolve`)
are kept distinct because each calls for a different
next step: a miscounted turn can be retried, a pruned one cannot, a key that was not set yet is
an answer in itself, and a deployment without history should be told apart from a gap in it.
In none of them does the current value stand in for an old one.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, Union, runtime_checkable

from ..state.reducer import StateEntry

__all__ = [
    "AUTO",
    "ConversationHistory",
    "DamagedState",
    "Found",
    "HasEndedToolState",
    "HasTurnStates",
    "HasVersionEnd",
    "HistoryError",
    "HistoryOption",
    "KeyNotSetYet",
    "NeverHappened",
    "NoHistory",
    "NotRetained",
    "Outcome",
    "StoreUnavailable",
    "ThreadHistory",
    "ThreadPresent",
    "TurnAnswer",
    "TurnIndex",
    "TurnMessages",
    "TurnSnapshot",
    "UnknownKey",
    "ValueEvicted",
    "gallop",
    "outcome",
    "retained_span",
    "turn_span",
]


AUTO: Literal["auto"] = "auto"
"""``history=AUTO`` (the default everywhere): read the history of the checkpointer the run is
using, found in the tool call's config at call time. Whatever compiled or attached that
checkpointer (``compile(checkpointer=...)``, ``graph.copy``, the Agent Server), the answer comes
from the saver holding the thread; with no checkpointer, reads beyond the ring say this
deployment keeps no turn history."""

HistoryOption = Union["ThreadHistory", Literal["auto"], None]
"""What a ``history=`` argument takes: a :class:`ThreadHistory`, :data:`AUTO`, or ``None`` (the
entries' rings only)."""


class HistoryError(Exception):
    """A thread's history could not be read. Its message is one line for a person; the
    subclass says why, and so what to do next."""


class DamagedState(HistoryError):
    """What storage holds for a thread's checkpoint cannot be read or is not a ``tool_state``
    this library wrote: a file edited by hand, a disk error, another program's rows.

    ``turn`` is the turn being read (``None``: the thread's current state). Other turns may
    still read: only the checkpoints an answer needs are read, and each is checked on its own.
    """

    def __init__(self, thread_id: str, turn: int | None, detail: str) -> None:
        self.thread_id, self.turn, self.detail = thread_id, turn, detail
        where = "its current state" if turn is None else f"turn {turn}"
        super().__init__(
            f"the stored state of thread {thread_id!r} is damaged at {where} and cannot be "
            f"read ({detail})"
        )


class StoreUnavailable(HistoryError):
    """The checkpoint store did not answer (a database down or unreachable, or too slow to
    answer in time), or, with ``refused``, answered that this role may not read what the read
    needs (a missing grant). Nothing is known to be wrong with the thread; the same read can be
    tried again once the store answers, or the role has its grant."""

    def __init__(self, detail: str, *, refused: bool = False) -> None:
        self.detail = detail
        self.refused = refused
        super().__init__(
            f"the checkpoint store refused the read ({detail}); grant the role access, then "
            "try again"
            if refused
            else f"the checkpoint store is not answering ({detail}); try again shortly"
        )


@dataclass(frozen=True, slots=True)
class TurnIndex:
    """The turns of a thread's current branch: how many there have been, which are retained.

    ``retained`` is a span (``range(first, total + 1)``, empty when none is): a prune keeps the
    latest turns, so what is retained is always contiguous and ends at the newest, and a span
    costs the same for a thread of ten turns and one of a million. ``total`` greater than
    ``len(retained)`` means history was pruned.
    """

    total: int
    retained: range

    def __post_init__(self) -> None:
        # A host's history may name the turns as any sequence; they must be a span.
        turns = self.retained
        if not isinstance(turns, range):
            turns = tuple(turns)
            span = (
                range(turns[0], turns[-1] + 1) if turns else range(self.total + 1, self.total + 1)
            )
            if tuple(span) != turns:
                raise ValueError(
                    f"retained turns must be consecutive (a prune keeps the latest), got {turns}"
                )
            object.__setattr__(self, "retained", span)


@dataclass(frozen=True, slots=True)
class TurnSnapshot:
    """A thread's ``tool_state`` as turn ``turn`` ended, with the thread's turn index.

    ``tool_state`` is ``None`` when the turn is not retained or never happened; ``index`` tells
    which.
    """

    turn: int
    index: TurnIndex
    tool_state: Mapping[str, StateEntry] | None


@dataclass(frozen=True, slots=True)
class TurnMessages:
    """A thread's messages where the clock closed turn ``turn``, with the clock record there
    (``record``, ``None`` on a thread the clock never ran on) and the thread's turn index.

    ``messages`` is ``None`` when the turn is not retained or never happened; ``index`` tells
    which. The record bounds the turn's own messages in the list
    (:func:`~mcp_state_versions.walk.conversation.turn_bounds`).
    """

    turn: int
    index: TurnIndex
    messages: list[Any] | None
    record: Mapping[str, Any] | None = None


@runtime_checkable
class ThreadHistory(Protocol):
    """A host's view of a thread's past, in turns and entries.

    Turns are 1-based and read from the turn clock (:mod:`mcp_state_versions.state.clock`), or for
    threads older than the clock counted as human messages. Implementations must answer for
    the thread's current branch only: a turn that a fork abandoned is not part of its history.
    """

    async def turns(self, thread_id: str) -> TurnIndex:
        """How many turns the thread has had and which of them are retained."""
        ...

    async def tool_state_at(self, thread_id: str, turn: int) -> TurnSnapshot:
        """``tool_state`` as ``turn`` ended (``None`` inside when not retained or never had)."""
        ...


# The shortcuts a ThreadHistory may offer. Each is a read the resolver can do with the two
# methods above, for less: the resolver takes it where ``isinstance`` finds it. CheckpointHistory
# subclasses all three, so renaming or changing one of its methods fails mypy and the test that
# checks it (tests/test_checkpoint_walk.py) instead of quietly turning the shortcut off.


@runtime_checkable
class HasEndedToolState(Protocol):
    """A history that can tell ``tool_state`` as a turn ended without counting the turns."""

    async def ended_tool_state(self, thread_id: str, turn: int) -> Mapping[str, StateEntry] | None:
        """``tool_state`` as ``turn`` ended, when a newer checkpoint on the branch shows that
        it did; ``None`` otherwise (``tool_state_at`` then tells which answer it is)."""
        ...


@runtime_checkable
class HasVersionEnd(Protocol):
    """A history that can find where a key's version ended in one read of the lineage."""

    async def version_end(
        self, thread_id: str, key: str, since: int, turn: int, last_possible: int
    ) -> int | None:
        """The last turn whose end still held ``key``'s version begun in ``since``, known to
        hold at ``turn`` and to have ended by ``last_possible``; ``None`` when history no
        longer tells."""
        ...


@runtime_checkable
class HasTurnStates(Protocol):
    """A history that can stream ``tool_state`` at every retained turn's end in one pass."""

    async def turn_states(
        self, thread_id: str
    ) -> tuple[TurnIndex, AsyncIterator[tuple[int, Mapping[str, StateEntry] | None]]]:
        """The thread's turn index, and ``tool_state`` as each retained turn ended, oldest
        first."""
        ...


@runtime_checkable
class ConversationHistory(Protocol):
    """A history that also holds each turn's messages: what ``inspect_state(key=
    "@conversation", turn=N)`` and the HTTP API's turn reads need
    (:class:`~mcp_state_versions.walk.checkpoints.CheckpointHistory` is one)."""

    async def turns(self, thread_id: str) -> TurnIndex:
        """How many turns the thread has had and which of them are retained."""
        ...

    async def turn_messages(self, thread_id: str, turn: int) -> TurnMessages:
        """The messages where the clock closed ``turn``, with the clock record there and the
        thread's turn index (no messages: the turn never happened or is not retained)."""
        ...


@dataclass(frozen=True, slots=True)
class Found:
    """``value`` is what ``key`` held at the end of ``turn``.

    ``since``/``until`` bound the version when known; ``current`` says it is still the key's
    value now (``until`` is then ``None``; for an older version ``None`` means its last turn is
    no longer retained). ``source`` says whether the entry's ring or the thread's history
    answered; nothing else about the answer depends on it. ``dropped``: the key is not in
    state now (an ``Overwrite`` dropped it after that turn); only history still holds it.
    """

    key: str
    turn: int
    value: Any
    since: int | None
    until: int | None
    source: Literal["ring", "history"]
    current: bool = False
    dropped: bool = False


@dataclass(frozen=True, slots=True)
class NeverHappened:
    """The thread has had ``total`` turns; ``turn`` is not one of them (a miscount: 404)."""

    key: str
    turn: int
    total: int


@dataclass(frozen=True, slots=True)
class NotRetained:
    """``turn`` happened, but its state is gone from history (pruned: 410)."""

    key: str
    turn: int
    total: int
    retained: range


@dataclass(frozen=True, slots=True)
class KeyNotSetYet:
    """``key`` had no value at the end of ``turn``; ``first_turn`` is when it was first set,
    when known."""

    key: str
    turn: int
    first_turn: int | None


@dataclass(frozen=True, slots=True)
class NoHistory:
    """The ring does not reach ``turn`` and this deployment keeps no turn history.

    ``oldest_in_ring`` is the earliest turn the entry itself can answer for.
    """

    key: str
    turn: int
    oldest_in_ring: int


@dataclass(frozen=True, slots=True)
class ValueEvicted:
    """``key`` had a value at the end of ``turn``, but it was too large for session state's
    size budget, so no checkpoint holds it (410). Nothing was pruned: it was never stored."""

    key: str
    turn: int


@dataclass(frozen=True, slots=True)
class UnknownKey:
    """``key`` is not in ``tool_state`` (or not readable by this caller)."""

    key: str


TurnAnswer = (
    Found | NeverHappened | NotRetained | KeyNotSetYet | NoHistory | ValueEvicted | UnknownKey
)


@dataclass(frozen=True, slots=True)
class Outcome:
    """How an answer is reported outside the model: a stable code and an HTTP-style status.

    The statuses follow the semantics the answers already have: 404 for something the thread
    never had (a miscounted turn, a key not set yet, an unknown key), 410 for something it had
    and no longer keeps.
    """

    code: str
    status: int
    #: What the answer tells a reader beyond its code: ``total``, ``retained`` (``{"first",
    #: "last"}``, or ``None`` when no turn is) and ``first_turn``, where the answer has them.
    details: dict[str, Any] = field(default_factory=dict)


_OUTCOMES: dict[type, tuple[str, int]] = {
    Found: ("found", 200),
    NeverHappened: ("turn_never_happened", 404),
    KeyNotSetYet: ("key_not_set_yet", 404),
    UnknownKey: ("unknown_key", 404),
    NotRetained: ("turn_not_retained", 410),
    NoHistory: ("no_turn_history", 410),
    ValueEvicted: ("value_evicted", 410),
}


def outcome(answer: TurnAnswer) -> Outcome:
    """The :class:`Outcome` of an answer (shared by the HTTP API and the command line)."""
    code, status = _OUTCOMES[type(answer)]
    details = {
        name: retained_span(value) if isinstance(value, range) else value
        for name in ("total", "retained", "first_turn")
        if (value := getattr(answer, name, None)) is not None
    }
    return Outcome(code, status, details)


def retained_span(retained: range) -> dict[str, int] | None:
    """``retained`` as ``{"first": ..., "last": ...}``, or ``None`` when no turn is retained:
    how the HTTP API and the command line report it."""
    return {"first": retained[0], "last": retained[-1]} if retained else None


def turn_span(turns: range) -> str:
    """``turns`` for a reader: ``"4–6"``, ``"4"``, or ``"none"``."""
    if not turns:
        return "none"
    return f"{turns[0]}–{turns[-1]}" if len(turns) > 1 else str(turns[0])


@dataclass(frozen=True, slots=True)
class ThreadPresent:
    """A thread as it stands: its ``tool_state`` and how many turns it has had.

    ``damage`` is set when the thread's newest checkpoint could not be read: ``tool_state`` is
    then empty, ``turn`` comes from the history's turn index, and only :func:`resolve_past`
    can answer (earlier turns may still read; the present cannot).
    """

    tool_state: Mapping[str, StateEntry]
    turn: int
    damage: DamagedState | None = None


async def gallop(holds: Callable[[int], Awaitable[bool | None]], low: int, high: int) -> int | None:
    """The last turn in ``low..high`` for which ``holds`` is true, given that it holds at
    ``low`` and that the turns it holds for are contiguous; ``None`` if a probe cannot tell.

    Galloping (``low+1, low+2, low+4, ...``, then bisection) costs O(log length) probes of the
    version's own length, not of the thread's: a key rewritten every turn needs one.
    """
    step, good, bad = 1, low, high + 1
    while good + step < bad:
        probe = good + step
        answer = await holds(probe)
        if answer is None:
            return None
        if answer:
            good, step = probe, step * 2
        else:
            bad = probe
            break
    while bad - good > 1:
        middle = (good + bad) // 2
        answer = await holds(middle)
        if answer is None:
            return None
        if answer:
            good = middle
        else:
            bad = middle
    return good
