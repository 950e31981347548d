"""Session state: the ``tool_state`` channel, its entries, and the reducer that merges writes.

Tools publish values into ``tool_state``, a dict from key (``<toolset>/<tool>/<field>``) to a
:class:`StateEntry`, plus one record under ``"__clock__"``: the turn clock and the reducer's
running totals (:mod:`mcp_state_versions.state.clock`). The entry is plain JSON-compatible data
rather than a pydantic model or a dataclass, so that every checkpointer (in-memory, SQLite,
PostgreSQL, or one written later) serializes it without any type being registered, and a
state reloaded from a checkpoint is exactly the state the run held. Pydantic is used at the
edges instead: a write entering the reducer is validated there, once.

The reducer, :func:`merge_tool_state`, is where versions are recorded (see
:mod:`mcp_state_versions.state.versions`). LangGraph requires reducers to be deterministic and
batching-invariant, ``r(r(s, xs), ys) == r(s, xs + ys)``, because it replays recorded writes in
whatever batches it likes when it rebuilds state; nothing checks that, and a reducer that breaks
it rebuilds a state the run never held. This one is built to hold it by construction: an update
is a sequence of single-key writes, each merged by the same step in order, and the step reads
nothing but the state so far and the write (no wall clock, no randomness, no global counter;
the turn clock is part of the state). The property tests check the law against a reference
model.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, NotRequired, Protocol, TypedDict, TypeGuard

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError

from .clock import CLOCK_KEY, count_turns, state_field
from .credentials import SECRET_NAMES, secret_paths
from .versions import RingPolicy, advance, canonical, strip_ring_values

__all__ = [
    "CLOCK_KEY",
    "DEFAULT_BUDGET_BYTES",
    "PUBLISHED",
    "REDUCERS",
    "TURN_METADATA_KEY",
    "PriorVersion",
    "StateEntry",
    "ToolStateError",
    "ToolStateReducer",
    "count_turns",
    "is_entry",
    "make_merge_tool_state",
    "merge_tool_state",
    "reducer_for",
    "state_field",
]

TURN_METADATA_KEY = "mcp_state_versions_turn"
"""Checkpoint metadata key under which :func:`mcp_state_versions.agent.build.run_turn` records the
turn a run belongs to: a hint that lets a checkpoint walk find turns without loading values.
The clock in each checkpoint's ``tool_state`` is what the hint is checked against."""

PUBLISHED = "mcp_state_versions"
"""The artifact key under which a publishing tool's message records the keys it wrote (read
back by a turn's conversation, which ties a value to the call that wrote it)."""

DEFAULT_BUDGET_BYTES = 8 * 1024 * 1024
"""Total JSON bytes ``tool_state`` may hold (current values plus ring values)."""

REDUCERS = 64
"""Reducers a process keeps for the ring bounds stored threads record (:func:`reducer_for`),
the least recently asked giving way, and four times as many of their batched and replayed
forms (:func:`~mcp_state_versions.storage.tool_state.batched`): caches of pure functions, bounded
because the bounds are read from storage, which any writer may have filled."""


class PriorVersion(TypedDict):
    """A value the key held before its current one, kept in the entry's ring.

    ``turn`` is the first turn whose end held the value (the version lasted until the next
    item's ``turn`` minus one). ``value`` and ``size`` are absent when the ring's bounds dropped
    the value but kept the version's identity. ``writes`` counts the writes of its first turn.
    """

    turn: int
    seq: int
    digest: str
    writes: NotRequired[int]
    value: NotRequired[Any]
    size: NotRequired[int]


class StateEntry(TypedDict):
    """One key of ``tool_state``. Plain data: every checkpointer stores it as is.

    * ``value``: the current value (absent only if the budget evicted it; see the reducer).
    * ``tool``: the tool that last wrote it.
    * ``seq``: write order across the whole ``tool_state`` (stamped by the reducer).
    * ``turn``: the turn of the last write, 1-based, from the turn clock.
    * ``since``: the first turn whose end held the current value.
    * ``versions``: how many values the key has held at turn ends, the current one included.
    * ``writes``: how many writes made the current version in its first turn (parallel calls
      writing one key in one step count each).
    * ``ring``: prior versions, oldest first (see :class:`PriorVersion`).
    * ``digest``/``size``: identity and JSON size of the current value; ``bytes``: JSON bytes the
      entry holds in values, for the budget.
    * ``adopted`` (only on values the reducer found in place, see below): the turn it first
      saw them; what the key held before that only checkpoint history knows.
    * ``evicted`` (only when ``value`` is absent): the turn the budget evicted it in. Later than
      ``turn``, the value is in the checkpoint that ended ``turn``; equal, no turn ended with it.
    * ``displaced`` (only with ``evicted``): the value was evicted to make room for another
      key's write, not because it did not fit itself.
    * ``earlier`` (only on a key first written after an ``Overwrite`` dropped keys): how many
      such drops came before it. The key may have held values before its first version here,
      which were dropped with their entry; reads of those turns go to checkpoint history,
      which holds them, instead of being told the key was not set.
    """

    value: NotRequired[Any]
    tool: str | None
    seq: int
    turn: int
    since: int
    versions: int
    writes: NotRequired[int]
    ring: list[PriorVersion]
    digest: str
    size: int
    bytes: int
    adopted: NotRequired[int]
    earlier: NotRequired[int]
    evicted: NotRequired[int]
    displaced: NotRequired[bool]


class ToolStateError(ValueError):
    """A write to ``tool_state`` that cannot be merged; the message says what to send instead."""


class _Write(BaseModel):
    """The shape of one write: ``{"value": ..., "tool": ..., "turn": ...}``.

    Anything else an entry carries (``seq``, ``versions``, ``ring`` ...) is computed by the
    reducer, so a caller that sends back a single entry is not trusted for those fields.
    """

    model_config = ConfigDict(extra="ignore", frozen=True)
    value: JsonValue
    tool: str | None = None
    turn: int | None = Field(default=None, ge=0)
    #: The value's canonical identity, when the writer computed it (publish does). A live merge
    #: checks it; a replay of stored writes, which were all merged live first, uses it as is.
    digest: str | None = None
    size: int | None = Field(default=None, ge=0)


class _Clock(BaseModel):
    """A clock write: a tick or a close from :mod:`mcp_state_versions.state.clock`, or a whole
    record from a ``tool_state`` the reducer produced."""

    model_config = ConfigDict(extra="ignore")
    turn: int | None = Field(ge=0)
    open: bool
    message: str | None = None
    seen: str | None = None
    late: bool = False
    budget: int | None = Field(default=None, ge=1)
    seq: int | None = Field(default=None, ge=0)
    bytes: int | None = Field(default=None, ge=0)
    newest: int | None = Field(default=None, ge=0)


def is_entry(value: Any) -> TypeGuard[StateEntry]:
    """Whether a ``tool_state`` value is an entry this library's reducer wrote."""
    # (a dict is told at once; the ABC check for any other mapping costs more per call)
    return (
        (type(value) is dict or isinstance(value, Mapping))
        and "versions" in value
        and "since" in value
    )


class ToolStateReducer:
    """A ``tool_state`` reducer (:func:`make_merge_tool_state` builds one): called as LangGraph
    calls a reducer, ``reducer(current, update) -> merged``.

    It is an object rather than a bare function because readers and the channel need more of it
    than the call: :attr:`bounds`, which a reader rebuilding stored state merges with
    (:func:`reducer_for`) and the turn clock records, and :meth:`merge_all`, which merges a batch
    of updates into a state the caller owns in one pass
    (:func:`~mcp_state_versions.storage.tool_state. batched`), with the result merging them one by
    one gives.
    """

    def __init__(self, merge_all: MergeAll, bounds: Mapping[str, int], doc: str) -> None:
        self._merge_all = merge_all
        self.bounds: dict[str, int] = dict(bounds)
        """``{"ring_size", "ring_bytes", "budget"}``: what the reducer keeps."""
        self.__name__ = self.__qualname__ = "merge_tool_state"
        self.__doc__ = doc

    def __call__(
        self, current: Mapping[str, Any] | None, update: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        return self._merge_all(dict(_as_state(current, "current tool_state")), (update,))

    def merge_all(
        self,
        merged: dict[str, Any],
        updates: Iterable[Mapping[str, Any] | None],
        *,
        replayed: bool = False,
    ) -> dict[str, Any]:
        """``merged`` (a dict the caller owns, changed in place) after ``updates``, one after
        another. ``replayed``: the updates are stored writes being replayed, which a live merge
        checked when each was first made, so their shape and identity are taken as they are."""
        return self._merge_all(merged, updates, replayed=replayed)

    def __repr__(self) -> str:
        return f"<ToolStateReducer {self.bounds}>"


class MergeAll(Protocol):
    def __call__(
        self,
        merged: dict[str, Any],
        updates: Iterable[Mapping[str, Any] | None],
        *,
        replayed: bool = False,
    ) -> dict[str, Any]: ...


def make_merge_tool_state(
    ring_size: int = 8,
    ring_bytes: int = 256 * 1024,
    budget_bytes: int = DEFAULT_BUDGET_BYTES,
) -> ToolStateReducer:
    """Build a ``tool_state`` reducer with its own ring bounds and total budget.

    ``ring_size`` prior values are kept per key while they fit in ``ring_bytes``;
    ``budget_bytes`` bounds all values held. Over budget, ring values go first (oldest write
    first, across keys), then current values of the least recently written keys; the key being
    written is never evicted. An evicted current value leaves its entry in place without
    ``value``, so a reader is told it was evicted rather than the key silently vanishing.

    **Where a write goes.** A write is ``{"value": <JSON>, "tool": str | None, "turn": int |
    None}``. Once the turn clock runs (:mod:`mcp_state_versions.state.clock`), the clock alone
    places it: in turn N while turn N is open, in N+1 once turn N has ended (an operator's edit
    between turns is then "set after turn N", and every read of turns ≤ N still answers what
    those turns ended with). ``turn`` stamps are not needed and cannot move a write into a
    finished turn.
    Without a clock (a graph that runs no clock nodes), a stamped write goes in its stamp's turn
    and an unstamped one in the newest turn recorded, and time never runs backwards inside an
    entry. A write without ``tool`` keeps the entry's tool.

    **Its own output.** A whole ``tool_state`` this reducer produced (it carries the clock
    record with its totals) merges into an empty or older state as itself, version records
    included: a subgraph that receives its parent's ``tool_state``, and the parent receiving the
    subgraph's result, lose nothing, and merging a state into itself changes nothing. Of two
    entries for one key the one with the later ``seq`` wins. A whole entry arriving *alone* (a
    tool returning an entry it copied or made up) is taken as a write of its ``value`` only: its
    ring and turns are ignored, so no write can invent what an earlier turn held.

    **Values found in place.** A ``tool_state`` that already holds plain values (a host moving
    from a plain dict channel) is adopted: each becomes an entry whose first version is the turn
    the reducer first sees it, marked ``adopted`` so that reads of earlier turns go to checkpoint
    history, which holds them, instead of being told the key was not set.

    Each write costs O(1) in the number of keys (the totals ride in the clock record), plus a
    sort of the entries when a write takes ``tool_state`` over budget.

    Raises :class:`ToolStateError` for a ``tool_state`` or write of the wrong shape, naming the
    key and what to send instead.
    """
    policy = RingPolicy(ring_size=ring_size, ring_bytes=ring_bytes)
    if budget_bytes <= 0:
        raise ValueError(f"budget_bytes must be positive, got {budget_bytes}")
    # Recorded in the clock record at every merge, so that a reader rebuilding a stored state
    # from its writes (mcp_state_versions.storage.tool_state.replay) merges them with the same
    # bounds.
    bounds = {"budget": budget_bytes, "ring_size": ring_size, "ring_bytes": ring_bytes}

    def merge_all(
        merged: dict[str, Any],
        updates: Iterable[Mapping[str, Any] | None],
        *,
        replayed: bool = False,
    ) -> dict[str, Any]:
        # The merge proper, into a dict the caller owns, one update after another: a replay of
        # many updates copies the state and opens the clock's books once, not once per update
        # (see storage.batched), and the result is the one merging them one by one gives.
        # ``replayed``: the updates are stored writes being replayed, which a live merge
        # checked when each was first made, so their shape and identity are taken as they are
        # (see storage.replayed).
        books: dict[str, Any] | None = None
        for update in updates:
            if not update:
                continue
            update = _as_state(update, "tool_state update")
            found_raw: list[str] = []
            if books is None:
                books, found_raw = _open_books(merged)
                books.update(bounds)
            if _from_another_branch(update, books) or _dropped_since(update, books):
                # another branch's state, or one that dropped keys ours still holds: it
                # replaces ours whole (see _from_another_branch, _dropped_since)
                merged.clear()
                books, found_raw = _open_books({})
                books.update(bounds)
            merge_one(merged, books, update, replayed)
            for key in found_raw:
                if not is_entry(merged.get(key)):
                    merged[key] = _adopt(merged[key], _placement(books, None))
                    books["bytes"] += merged[key]["bytes"]
        if books is not None:
            merged[CLOCK_KEY] = books
        return merged

    def merge_one(
        merged: dict[str, Any], books: dict[str, Any], update: Mapping[str, Any], replayed: bool
    ) -> None:
        whole = _is_whole_state(update)
        written: set[str] = set()
        for key, raw in update.items():
            if key == CLOCK_KEY:
                _join_clock(books, raw, may_jump=whole or replayed)
                if not whole:
                    _count_write(books, _CLOCK_WRITE_BYTES, key=False)
                continue
            before = merged.get(key)
            previous = before
            if previous is not None and not is_entry(previous):
                previous = _adopt(previous, _placement(books, None))
            if whole and is_entry(raw) and not _edited_in_place(raw, previous):
                entry = _whole_entry(key, raw, previous)
            else:
                vouched, built = (None, False) if replayed else _VOUCHED.take(raw)
                write = (
                    _replayed_write(key, raw) if replayed or built else _validate_write(key, raw)
                )
                books["seq"] += 1
                turn = _placement(books, write.turn)
                if books.get("turn") is not None and not books["open"]:
                    books["late"] = True  # the clock's turn has ended, and state moved on
                if previous is not None:
                    turn = max(turn, previous["turn"])
                tool = (
                    write.tool if write.tool is not None or previous is None else previous["tool"]
                )
                entry = advance(
                    previous,
                    value=write.value,
                    tool=tool,
                    seq=books["seq"],
                    turn=turn,
                    policy=policy,
                    # an entry arriving alone is a write of its value only: its digest is not
                    # the writer's claim, it is computed again
                    identity=(
                        None
                        if is_entry(raw)
                        else vouched or _identity(key, write, checked=not replayed)
                    ),
                )
                if previous is None and "dropped" in books:
                    entry["earlier"] = books["dropped"]  # the key may have held values before
                entry.pop("evicted", None)  # a fresh dict: it holds a value again
                entry.pop("displaced", None)
                _count_write(books, entry["size"] + len(key) + _WRITE_BYTES)
            books["bytes"] += entry["bytes"] - (before["bytes"] if is_entry(before) else 0)
            books["seq"] = max(books["seq"], entry["seq"])
            books["newest"] = max(books["newest"], entry["turn"])
            merged[key] = entry
            written.add(key)
            if books["bytes"] > budget_bytes:
                books["bytes"] = _enforce_budget(
                    merged, books["bytes"], budget_bytes, key, written, turn=entry["turn"]
                )

    return ToolStateReducer(
        merge_all,
        bounds,
        f"Merge a tool_state update (ring_size={ring_size}, ring_bytes={ring_bytes}, "
        f"budget_bytes={budget_bytes}); see make_merge_tool_state.",
    )


def _as_state(value: Any, what: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ToolStateError(
            f"{what} must be a dict of key -> entry, got {type(value).__name__}; "
            "publish values with mcp_state_versions.agent.publish or send "
            '{"<key>": {"value": ...}}'
        )
    return value


def _open_books(merged: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The clock record with its totals, as a fresh dict the merge may change.

    A state without a record (written before the clock, or by a plain dict channel) is scanned
    once to start the totals; its plain values are listed for adoption.
    """
    record = merged.get(CLOCK_KEY)
    if isinstance(record, Mapping) and "seq" in record and "bytes" in record:
        return dict(record), []
    entries = [entry for key, entry in merged.items() if key != CLOCK_KEY and is_entry(entry)]
    found_raw = [key for key, entry in merged.items() if key != CLOCK_KEY and not is_entry(entry)]
    books: dict[str, Any] = {"turn": None, "open": False}
    if isinstance(record, Mapping):
        books = _join_clock(books, record)
    books["seq"] = max((entry["seq"] for entry in entries), default=0)
    books["bytes"] = sum(entry["bytes"] for entry in entries)
    books["newest"] = max((entry["turn"] for entry in entries), default=0)
    return books, found_raw


def _join_clock(books: dict[str, Any], raw: Any, *, may_jump: bool = True) -> dict[str, Any]:
    """Merge a clock write into ``books`` (in place, and returned): the later turn wins;
    within a turn, closed wins over open.

    A tick moves the clock by one turn. One that would skip turns (an operator's
    ``update_state`` with ``turn: 10**6``) is refused unless ``may_jump``: such a clock would
    claim turns that never happened, and retention counts back from it, so a prune that keeps
    the last few turns would find none of the thread's checkpoints in them. A whole state may
    jump (a persistent subgraph's state catches up with its parent's by one whole update), and
    so may a stored write being replayed, which a live merge accepted when it was made.
    """
    try:
        clock = _Clock.model_validate(raw)
    except ValidationError as error:
        raise ToolStateError(
            f"the {CLOCK_KEY!r} record in a tool_state update is not valid ({error.errors()[0]}); "
            "it is written by mcp_state_versions.state.clock.open_turn and close_turn only"
        ) from None
    if clock.seq is not None:
        books["seq"] = max(books.get("seq", 0), clock.seq)
    if clock.newest is not None:
        books["newest"] = max(books.get("newest", 0), clock.newest)
    for name in ("writes", "written", "dropped"):  # what a whole state's record carries
        found = raw.get(name) if isinstance(raw, Mapping) else None
        if type(found) is int and found >= 0:
            books[name] = max(books.get(name, 0), found)
    ours = books.get("turn")
    if clock.turn is None or (ours is not None and clock.turn < ours):
        return books
    if not may_jump and ours is not None and clock.turn > ours + 1:
        raise ToolStateError(
            f"the turn clock is at turn {ours} and moves one turn at a time; a clock write "
            f"for turn {clock.turn} would skip turns that never happened and is refused. "
            "The clock is written by mcp_state_versions.state.clock.open_turn and close_turn only"
        )
    fields = raw if isinstance(raw, Mapping) else {}
    if ours is None or clock.turn > ours:
        books["turn"], books["open"] = clock.turn, clock.open
        for name in ("message", "seen", "late"):
            books.pop(name, None)
        _remember_opening(books, fields)
    else:
        books["open"] = books["open"] and clock.open
    for name in ("message", "seen"):
        if name in fields:
            books[name] = fields[name]
    if clock.late:
        books["late"] = True
    return books


COUNTED_OPENINGS = 8
"""How many recent turns' opening user messages the clock remembers (besides the first's)."""


def _remember_opening(books: dict[str, Any], fields: Mapping[str, Any]) -> None:
    """Note the user message that opened the new turn among those already counted.

    A run that brings no new user message must not tick the clock, and the newest user
    message is how :func:`~mcp_state_versions.state.clock.open_turn` tells. After the messages are
    wiped or trimmed down to an earlier user message (the first one, typically, which trims
    keep), the newest one is a message counted long ago; these ids say so. A whole state
    carries its own list, which is kept as it is.
    """
    counted = fields.get("counted")
    if isinstance(counted, list):
        books["counted"] = [str(m) for m in counted[-COUNTED_OPENINGS:]]
        if isinstance(fields.get("first"), str):
            books["first"] = fields["first"]
        return
    message = fields.get("message")
    if not isinstance(message, str):
        return
    books.setdefault("first", message)
    books["counted"] = [*books.get("counted", [])[-(COUNTED_OPENINGS - 1) :], message]


def _placement(books: Mapping[str, Any], stamp: int | None) -> int:
    """The turn a write goes in: by the clock when it runs, else by stamp or newest turn."""
    turn = books.get("turn")
    if turn is not None:
        return turn if books["open"] else turn + 1
    return books["newest"] if stamp is None else stamp


def _from_another_branch(update: Mapping[str, Any], books: Mapping[str, Any]) -> bool:
    """Whether ``update`` is a whole ``tool_state`` of another branch than ours: its clock is
    at an earlier turn, or at the same turn opened by another user message.

    State only moves forward along a branch: a subgraph's state is its parent's plus what the
    subgraph did, and the parent takes it back, in the same turn, opened by the same message.
    A persistent subgraph (``checkpointer=True``) keeps its own newest state across its
    parent's runs; when the parent forks from an earlier turn, that state is the abandoned
    branch's (at a later turn, or at the fork's turn opened by the abandoned branch's
    message), and the parent's input is the fork's. Merged entry by entry, the abandoned
    branch's later ``seq`` and turn would win: the fork would read another branch's values,
    and turns that never happened on it. So such a state replaces ours whole, as a plain
    last-value channel would.
    """
    ours = books.get("turn")
    if ours is None or not _is_whole_state(update):
        return False
    record = update[CLOCK_KEY]
    theirs = record.get("turn")
    if type(theirs) is not int or theirs > ours:
        return False
    if theirs < ours:
        return True
    opened, ours_opened = record.get("message"), books.get("message")
    return isinstance(opened, str) and isinstance(ours_opened, str) and opened != ours_opened


def _dropped_since(update: Mapping[str, Any], books: Mapping[str, Any]) -> bool:
    """Whether ``update`` is a whole ``tool_state`` whose clock records more ``Overwrite`` s
    that dropped keys than ours does (``dropped``).

    A persistent subgraph keeps its own newest state across its parent's runs; when the
    parent dropped keys since, merged entry by entry the subgraph's copies of them would come
    back with its result. The parent's state is what the drop left, so it replaces ours whole.
    """
    if not _is_whole_state(update):
        return False
    theirs = update[CLOCK_KEY].get("dropped")
    ours = books.get("dropped")
    return type(theirs) is int and (type(ours) is not int or theirs > ours)


def _is_whole_state(update: Mapping[str, Any]) -> bool:
    record = update.get(CLOCK_KEY)
    return isinstance(record, Mapping) and "seq" in record and "bytes" in record


_WRITE_BYTES = 10
"""About what a stored write adds to its value's JSON bytes and its key (framing; publish
stores neither the tool nor the turn once the entry and the clock tell them)."""

_CLOCK_WRITE_BYTES = 44
"""About what a stored clock write takes (the turn, open or closed, one message mark)."""


def _count_write(books: dict[str, Any], size: int, *, key: bool = True) -> None:
    """Count about the bytes a write takes stored, and a key's write: totals that add up the
    same however the writes are batched, which the snapshot cadence is set from (see
    storage)."""
    if key:
        books["writes"] = books.get("writes", 0) + 1
    books["written"] = books.get("written", 0) + size


_ENTRY_COUNTS = {"seq": 0, "turn": 0, "since": 0, "versions": 1, "size": 0, "bytes": 0}
"""The integer fields of an entry, with the least value each can hold."""

_RING_ITEM_COUNTS = {"turn": 0, "seq": 0}


def _bad_counts(item: Mapping[str, Any], least: Mapping[str, int]) -> list[str]:
    """The fields of ``item`` that are not integers (``bool`` is not one) of at least their
    least value."""
    return [
        name
        for name, floor in least.items()
        if type(value := item.get(name)) is not int or value < floor
    ]


def entry_problems(raw: Mapping[str, Any]) -> list[str]:
    """The fields of an entry that do not have the shape every reader relies on (``[]``: it
    has it): counts that are integers of their least value, a digest, a ring of items each
    with its counts and digest."""
    problems = _bad_counts(raw, _ENTRY_COUNTS)
    if not isinstance(raw.get("digest"), str):
        problems.append("digest")
    ring = raw.get("ring")
    if not isinstance(ring, list) or not all(
        isinstance(item, Mapping)
        and not _bad_counts(item, _RING_ITEM_COUNTS)
        and isinstance(item.get("digest"), str)
        for item in ring
    ):
        problems.append("ring")
    return problems


def stored_state_problem(tool_state: Any, checked: Mapping[str, Any] | None = None) -> str | None:
    """What is wrong with a ``tool_state`` read back from storage, or ``None``.

    ``checked`` is a state already found sound: entries that are the very objects it holds
    (a state carried from it by the writes after it shares every entry they left alone) are
    not checked again, so a read carried forward costs what the writes changed.

    Storage is outside the library's hands: a file edited by hand, a disk error, another
    program's rows. Readers index entries, iterate rings and compare counts, and a value of
    the wrong type there would fail deep inside a read with an error that names nothing the
    caller can act on. So what is read is checked once, here, in O(keys + ring items), and a
    damaged checkpoint is reported as such (see
    :class:`mcp_state_versions.walk.history.DamagedState`).
    A plain value under a key (stored without the reducer) is not damage: readers adopt it.
    """
    if tool_state is None:
        return None
    if not isinstance(tool_state, Mapping):
        return f"tool_state is a {type(tool_state).__name__}, not a dict of entries"
    for key, entry in tool_state.items():
        if not isinstance(key, str):
            return f"a key is a {type(key).__name__}, not text"
        if key == CLOCK_KEY:
            if not isinstance(entry, Mapping) or not (
                entry.get("turn") is None or type(entry.get("turn")) is int
            ):
                return f"the turn clock record is not valid: {_clipped(entry)}"
            continue
        if checked is not None and checked.get(key) is entry:
            continue
        if isinstance(entry, Mapping) and ("versions" in entry or "since" in entry):
            problems = entry_problems(entry)
            if problems:
                return f"the entry of {key!r} has bad or missing {', '.join(problems)}"
    return None


def _clipped(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _whole_entry(key: str, raw: Mapping[str, Any], previous: Any) -> Any:
    """An entry from a whole ``tool_state`` the reducer produced: kept if newer than ours.

    Checked by hand rather than by a model: this runs for every key a subgraph hands back,
    and the entry came from this reducer; the check is only that it has the shape every
    reader relies on (eviction, for one, orders ring items by their ``seq``).
    """
    problems = entry_problems(raw)
    if problems:
        raise ToolStateError(
            f"tool_state entry for {key!r} is not one this reducer produced (bad or missing: "
            f'{", ".join(problems)}); send a write {{"value": ...}} instead'
        )
    if is_entry(previous) and raw["seq"] <= previous["seq"]:
        return previous
    return dict(raw)


def overwritten(
    before: Any,
    replacement: Any,
    fold: Callable[[Any, list[Any]], dict[str, Any]],
) -> dict[str, Any]:
    """``tool_state`` after an ``Overwrite(replacement)`` of ``before``, merged by ``fold``
    (the channel's batched reducer).

    An operator who rebuilds ``tool_state`` from what readers see (after a summarization, to
    drop keys) sends the keys to keep, as entries or as plain values, and cannot send the turn
    clock, which is the library's own record. Taken as it is, that Overwrite would restart the
    clock, renumber every later turn and misplace every later read. So the keys it names are
    kept and the rest dropped, and the clock goes on: a kept key keeps its entry and its ring
    (a plain value equal to the current one is the same version), a new or changed value is a
    write in the present turn. A replacement that carries its own clock record (the reducer's
    own output, a subgraph's or a snapshot's) is taken as it is, as is one over a state that
    has no clock. Deterministic in its inputs, so a replay of the stored Overwrite agrees.
    """
    replacement = _as_state(replacement, "an Overwrite of tool_state")
    record = before.get(CLOCK_KEY) if isinstance(before, Mapping) else None
    if (
        _is_whole_state(replacement)
        or not isinstance(record, Mapping)
        or not _is_whole_state({CLOCK_KEY: record})
    ):
        return dict(replacement)
    kept: dict[str, Any] = {}
    update: dict[str, Any] = {}
    for key, raw in replacement.items():
        ours = before.get(key)
        if is_entry(raw) or not is_entry(ours) or ours.get("value", _ABSENT) != raw:
            update[key] = raw if is_entry(raw) else {"value": raw}
        if is_entry(ours):
            kept[key] = ours
    books = {**record, "bytes": sum(entry["bytes"] for entry in kept.values())}
    if any(key != CLOCK_KEY and key not in replacement for key in before):
        # Keys are dropped: one written again later starts a new entry, whose turns before
        # it only history can tell (see StateEntry's ``earlier``).
        books["dropped"] = int(record.get("dropped") or 0) + 1
        if books.get("turn") is not None and not books.get("open"):
            books["late"] = True  # the turn had ended: this state is after its end
    kept[CLOCK_KEY] = books
    return fold(kept, [{**update, CLOCK_KEY: books}]) if update else kept


def _edited_in_place(raw: Mapping[str, Any], previous: Any) -> bool:
    """Whether a whole state's entry is ours with its ``value`` changed by hand.

    An operator's natural edit is ``get_state``, change a value, ``update_state`` with the
    whole ``tool_state``: the entry still carries the ``seq`` of the version it was read at,
    so as a whole entry it would lose to ours (equal ``seq``) and the edit would vanish
    without a word. Same ``seq``, another value: it is merged as a write of that value
    instead. Deterministic in the two entries, so a replay of the stored update agrees.
    """
    if not is_entry(previous) or raw.get("seq") != previous["seq"]:
        return False
    ours, theirs = previous.get("value", _ABSENT), raw.get("value", _ABSENT)
    return theirs is not _ABSENT and theirs is not ours and theirs != ours


_ABSENT = object()


def _adopt(value: Any, turn: int) -> StateEntry:
    """An entry for a plain value found in ``tool_state``: one version, seen first now."""
    entry = advance(None, value=value, tool=None, seq=0, turn=turn, policy=RingPolicy(ring_size=0))
    entry["adopted"] = turn
    return entry


class _Vouched:
    """Values :func:`~mcp_state_versions.agent.publish.publish` serialized in this process, each
    with the identity it computed, and the write it built around it.

    Why: publishing serializes each changed value once, for its ``(digest, size)``, and the
    live merge that follows would otherwise serialize it again to check the claim (for a 200
    KB value, 1.4 ms each time). A value is vouched for by the object itself, not by anything
    a write says: publish builds the write and its value (``to_jsonable_python`` copies what
    the tool returned), and the merge looks the value up by identity (``is``). ``ToolNode``
    deep-copies a tool's ``Command``, so the write reaching the merge is a copy; a copy of a
    text or a number is the same object (immutable), a copy of a list or an object is not and
    is serialized again. Found with its own write, the write is merged as its check would have
    merged it; found in another write (a copy), that write is validated and only the value's
    serialization is saved. Any other write, including one read back from storage or sent by
    another process, is validated and checked as before. Entries are taken by the merge;
    those never merged (a step that failed) give way, oldest first, past :attr:`LIMIT` bytes
    of values.
    """

    LIMIT = 32 * 1024 * 1024

    def __init__(self) -> None:
        self._values: dict[int, tuple[Mapping[str, Any], Any, tuple[str, int]]] = {}
        self._bytes = 0
        self._lock = threading.Lock()

    def vouch(self, write: Mapping[str, Any], identity: tuple[str, int]) -> None:
        value = write.get("value")
        with self._lock:
            if id(value) in self._values:
                self._bytes -= self._values[id(value)][2][1]
            self._values[id(value)] = (write, value, identity)
            self._bytes += identity[1]
            while self._bytes > self.LIMIT and self._values:
                oldest = next(iter(self._values))  # dicts keep insertion order
                self._bytes -= self._values.pop(oldest)[2][1]

    def take(self, write: Any) -> tuple[tuple[str, int] | None, bool]:
        """``(identity, whole)``: the identity vouched for ``write``'s value (``None``: none),
        and whether ``write`` is the very write publish built."""
        value = write.get("value") if isinstance(write, Mapping) else None
        with self._lock:
            found = self._values.get(id(value))
            if found is None or found[1] is not value:
                return None, False
            del self._values[id(value)]
            self._bytes -= found[2][1]
            return found[2], found[0] is write


_VOUCHED = _Vouched()


def vouch(write: Mapping[str, Any], identity: tuple[str, int]) -> None:
    """Record that this process built ``write`` and computed its value's ``identity``
    (see :class:`_Vouched`); only :meth:`~mcp_state_versions.agent.publish.Publication.update`
    calls it, as it hands the writes to the graph."""
    _VOUCHED.vouch(write, identity)


def _identity(key: str, write: _Write | _StoredWrite, *, checked: bool) -> tuple[str, int]:
    """The value's ``(digest, size)``: the writer's, checked against the value in a live merge
    (a write whose claim is wrong is refused, so every stored write that was merged carries a
    true one), taken as is in a replay; computed when the writer gave none."""
    claimed = (write.digest, write.size)
    if claimed[0] is not None and claimed[1] is not None and not checked:
        return claimed  # type: ignore[return-value]
    identity = canonical(write.value)
    if (claimed[0] is not None or claimed[1] is not None) and claimed != identity:
        raise ToolStateError(
            f"tool_state write for {key!r} gives a digest or size that does not match its "
            "value; leave both out (the reducer computes them) or compute them with "
            "mcp_state_versions.state.versions.canonical"
        )
    return identity


@dataclass(frozen=True, slots=True)
class _StoredWrite:
    """A stored write's fields as a replay takes them: :class:`_Write`'s, without building a
    pydantic model (``model_construct`` alone was a third of a small write's replay)."""

    value: Any
    tool: str | None
    turn: int | None
    digest: str | None
    size: int | None


def _replayed_write(key: Any, raw: Any) -> _Write | _StoredWrite:
    """A stored write being replayed: merged live once already, so not validated again (the
    cost of a run start is replaying them). Shapes no live merge accepts are still refused."""
    if not isinstance(raw, Mapping) or "value" not in raw:
        return _validate_write(key, raw)
    digest, size, turn, tool = raw.get("digest"), raw.get("size"), raw.get("turn"), raw.get("tool")
    return _StoredWrite(
        raw["value"],
        tool if isinstance(tool, str) else None,
        turn if type(turn) is int and turn >= 0 else None,
        digest if isinstance(digest, str) else None,
        size if type(size) is int and size >= 0 else None,
    )


def refuse_secret_writes(update: Any, secret_names: str | None = SECRET_NAMES) -> None:
    """Raise :class:`ToolStateError` when a ``tool_state`` update (writes, a whole state, an
    ``Overwrite``) would store a field named like a credential: an operator's
    ``update_state({"tool_state": {"ops/edit/password": {"value": ...}}})``, a nested
    ``api_key``, a value edited in place.

    The library's savers call it on every ``tool_state`` write before storing it: a write is
    stored before any reducer sees it, so this is the one gate every path into storage passes.
    A write :func:`~mcp_state_versions.agent.publish.publish` made (it carries the value's
    ``digest`` and no entry fields) was withheld there, by the toolset's own names, and is not
    walked again; every other value is. ``secret_names=None`` lets everything through."""
    if not secret_names:
        return
    overwrite = type(update).__name__ == "Overwrite"
    update = getattr(update, "value", update) if overwrite else update
    if not isinstance(update, Mapping):
        return
    for key, write in update.items():
        if not isinstance(key, str) or key == CLOCK_KEY:
            continue
        if isinstance(write, Mapping) and "value" in write:
            if "digest" in write and not is_entry(write):
                continue  # publish's own write
            write = write["value"]
        elif not overwrite:
            continue  # no write the reducer takes (it refuses it, saying why)
        found = secret_paths(write, key, secret_names)  # a value, or an Overwrite's plain one
        if found:
            raise _secret_refused(key, found)


def _secret_refused(key: str, found: list[str]) -> ToolStateError:
    return ToolStateError(
        f"tool_state write for {key!r} holds {', '.join(found[:5])}, named like a credential: "
        "secrets are never stored. Leave them out (publish does, and says so in the "
        "breadcrumb); a saver with secret_names=None stores them"
    )


def _validate_write(key: Any, raw: Any) -> _Write:
    if not isinstance(key, str) or not key:
        raise ToolStateError(f"tool_state keys are non-empty strings, got {key!r}")
    if not isinstance(raw, Mapping) or "value" not in raw:
        raise ToolStateError(
            f"tool_state write for {key!r} must be a dict with a 'value' field "
            f'(e.g. {{"value": ...}}), got {type(raw).__name__}'
        )
    try:
        return _Write.model_validate(raw)
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'write'}: {e['msg']}" for e in error.errors()
        )
        raise ToolStateError(
            f"tool_state write for {key!r} is not valid ({problems}). Values must be JSON data "
            "(dicts with string keys, lists, strings, numbers, booleans, null); convert others "
            "first, as mcp_state_versions.agent.publish does."
        ) from None


def _enforce_budget(
    merged: dict[str, Any],
    held: int,
    budget: int,
    key: str,
    written: set[str],
    *,
    turn: int,
) -> int:
    """Evict until ``held <= budget``, ``key`` having just been written in this update.

    First ring values, oldest write first; then current values of keys this update did not
    write, least recently written first; and if that is still not enough, ``key``'s own value:
    an update keeps its values in order while they fit and stores the rest evicted. That order
    is what lets a tool's reply name the fields it could not keep before the merge happens
    (:func:`mcp_state_versions.agent.publish.publish` computes it from the budget and the sizes).
    Each eviction records the turn it happened in (``evicted``), so a reader knows whether any
    turn ended holding the value. Deterministic: ordered by ``seq``, never by dict or time.
    """
    entries = [(k, e) for k, e in merged.items() if k != CLOCK_KEY and is_entry(e)]
    ring_values = sorted(
        (item["seq"], k) for k, entry in entries for item in entry["ring"] if "value" in item
    )
    for _, name in ring_values:
        if held <= budget:
            return held
        before = merged[name]["bytes"]
        merged[name] = strip_ring_values(merged[name], 1)
        held += merged[name]["bytes"] - before
    others = sorted(
        (entry["seq"], k) for k, entry in entries if k not in written and "value" in entry
    )
    for _, name in [*others, (0, key)]:
        if held <= budget:
            break
        held -= _evict(merged, name, turn, displaced=name != key)
    return held


def _evict(merged: dict[str, Any], key: str, turn: int, *, displaced: bool) -> int:
    """Drop ``key``'s current value, keeping its entry; returns the bytes freed.

    ``displaced``: the value made room for another key's write (rather than not fitting
    itself), which a reader is told, since the value may have been small.
    """
    entry = merged[key]
    if "value" not in entry:
        return 0
    evicted = {k: v for k, v in entry.items() if k != "value"}
    evicted["bytes"] = entry["bytes"] - entry["size"]
    evicted["evicted"] = turn
    if displaced:
        evicted["displaced"] = True
    merged[key] = evicted
    return int(entry["size"])


merge_tool_state = make_merge_tool_state()
"""The default reducer: ring of 8 prior values within 256 KiB per key, 8 MiB in all."""


@lru_cache(maxsize=REDUCERS)
def _reducer_with(ring_size: int, ring_bytes: int, budget_bytes: int) -> Callable[..., Any]:
    bounds = {"budget": budget_bytes, "ring_size": ring_size, "ring_bytes": ring_bytes}
    if bounds == merge_tool_state.bounds:
        return merge_tool_state
    return make_merge_tool_state(ring_size, ring_bytes, budget_bytes)


def recorded_bounds(tool_state: Any) -> tuple[int, int, int] | None:
    """``(ring_size, ring_bytes, budget)`` as a ``tool_state`` (or a clock tick) records them."""
    record = tool_state.get(CLOCK_KEY) if isinstance(tool_state, Mapping) else None
    if not isinstance(record, Mapping):
        return None
    found: list[Any] = [record.get(name) for name in ("ring_size", "ring_bytes", "budget")]
    if not all(type(value) is int and value >= 0 for value in found) or found[2] < 1:
        return None
    return found[0], found[1], found[2]


def reducer_for(*sources: Any) -> Callable[..., dict[str, Any]]:
    """The reducer with the bounds the first of ``sources`` to record any records (a
    ``tool_state``, or a clock tick from :func:`~mcp_state_versions.state.clock.open_turn`); the
    default reducer where none does.

    A reader that rebuilds stored state from its writes without knowing the graph merges them
    with this, so the rings and evictions it rebuilds are the ones the graph produced.
    """
    for source in sources:
        bounds = recorded_bounds(source)
        if bounds is not None:
            return _reducer_with(*bounds)
    return merge_tool_state
