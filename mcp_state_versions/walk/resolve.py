"""Resolving a read: "this key, as of that turn", once, for every reader.

:func:`resolve_turn` is the single definition of a turn read, used by the ``inspect_state``
tool, by ``@state:`` handles in tool arguments, by the HTTP API and by the command line, so that
a model and a person asking the same question get the same answer. It asks the entry's ring
first and the history only for versions the ring no longer holds. :func:`resolve_versions` lists
every version a key has held, reading history once per version the ring does not hold.

Nothing here words an answer (:mod:`mcp_state_versions.wording.answers` does, for a model) or parses
a caller's input (each reader validates its own, since each addresses a different caller).
"""

from __future__ import annotations

import fnmatch
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from langchain_core.runnables import RunnableConfig

from ..state.clock import entries_of
from ..state.reducer import StateEntry, is_entry
from ..state.versions import RingBeforeFirst, RingHit, value_at_turn, version_spans
from .history import (
    AUTO,
    Found,
    HasEndedToolState,
    HasTurnStates,
    HasVersionEnd,
    HistoryOption,
    KeyNotSetYet,
    NeverHappened,
    NoHistory,
    NotRetained,
    ThreadHistory,
    TurnAnswer,
    TurnSnapshot,
    UnknownKey,
    ValueEvicted,
    gallop,
)

__all__ = [
    "KeyTimeline",
    "Timeline",
    "VersionRow",
    "as_of",
    "entry_at",
    "history_of_run",
    "key_allowed",
    "resolve_past",
    "resolve_timeline",
    "resolve_turn",
    "resolve_versions",
    "thread_of",
    "versioned_entries",
    "visible_keys",
]


def key_allowed(key: str, allowed_keys: Sequence[str] | None) -> bool:
    """Whether ``key`` matches one of ``allowed_keys`` (globs; ``None``: every key does)."""
    return allowed_keys is None or any(fnmatch.fnmatchcase(key, p) for p in allowed_keys)


def visible_keys(
    tool_state: Mapping[str, Any], allowed_keys: Sequence[str] | None
) -> dict[str, Any]:
    """The published keys of ``tool_state`` that match ``allowed_keys`` (globs; ``None``: all)."""
    published = entries_of(tool_state)
    if allowed_keys is None:
        return published
    return {key: entry for key, entry in published.items() if key_allowed(key, allowed_keys)}


def versioned_entries(tool_state: Mapping[str, Any]) -> Mapping[str, StateEntry]:
    """Only true entries can answer for the past; a raw value is treated as unversioned."""
    return {key: entry for key, entry in entries_of(tool_state).items() if is_entry(entry)}


def history_of_run(
    history: HistoryOption, config: RunnableConfig | None, *, sync: bool
) -> ThreadHistory | None:
    """The history a read inside a run uses: ``AUTO`` is the history of the checkpointer this
    run uses (from the run's ``config``, looked up now); anything else is used as given."""
    if history != AUTO:
        return history  # type: ignore[return-value]
    from .checkpoints import history_for_run

    return history_for_run(config or {}, sync=sync)


def thread_of(config: RunnableConfig | None) -> str | None:
    """The thread a run's ``config`` names (``configurable.thread_id``), if any."""
    configurable = (config or {}).get("configurable") or {}
    thread_id = configurable.get("thread_id")
    return None if thread_id is None else str(thread_id)


async def resolve_turn(
    tool_state: Mapping[str, StateEntry],
    key: str,
    turn: int,
    *,
    current_turn: int,
    history: ThreadHistory | None = None,
    thread_id: str | None = None,
) -> TurnAnswer:
    """What ``key`` held at the end of ``turn`` on the thread whose present is ``tool_state``.

    ``current_turn`` is the thread's turn now (:func:`mcp_state_versions.state.clock.current_turn`
    of its state). ``turn`` must be ``>= 1``; validating a caller's input is the caller's job,
    since each addresses a different reader.
    """
    entry = tool_state.get(key)
    if entry is None:
        if history is None or thread_id is None or not 1 <= turn <= current_turn:
            return UnknownKey(key=key)
        return await _dropped_key(key, turn, history, thread_id)
    if turn > current_turn:
        return NeverHappened(key=key, turn=turn, total=current_turn)
    lookup = value_at_turn(entry, turn)
    if isinstance(lookup, RingHit):
        return Found(
            key,
            turn,
            lookup.value,
            lookup.since,
            lookup.until,
            source="ring",
            current=lookup.until is None,
        )
    if isinstance(lookup, RingBeforeFirst):
        return KeyNotSetYet(key=key, turn=turn, first_turn=lookup.first_turn)
    if history is None or thread_id is None:
        return NoHistory(key=key, turn=turn, oldest_in_ring=lookup.oldest_in_ring)
    state = await _ended_state(history, thread_id, turn)
    if state is not None:
        past = _entry_in(state, key, turn)
    else:
        past = _past_entry(await history.tool_state_at(thread_id, turn), key, turn, current_turn)
    if not is_entry(past):
        return past  # type: ignore[no-any-return]
    since = past["since"]
    if since == entry["since"] and past["digest"] == entry["digest"]:
        return Found(key, turn, past["value"], since, None, source="history", current=True)
    until = await _version_end(entry, key, since, turn, history, thread_id)
    return Found(key, turn, past["value"], since, until, source="history")


async def _dropped_key(key: str, turn: int, history: ThreadHistory, thread_id: str) -> TurnAnswer:
    """``key`` as ``turn`` ended, for a key the present does not hold: an ``Overwrite`` may
    have dropped it since, and then the turn's own state still holds what it ended with. A
    key that turn did not hold either is unknown, as the present says."""
    answer = await resolve_past(key, turn, history=history, thread_id=thread_id)
    if isinstance(answer, Found):
        return replace(answer, dropped=True)
    if isinstance(answer, KeyNotSetYet):
        return UnknownKey(key=key)
    return answer


async def _ended_state(
    history: ThreadHistory, thread_id: str, turn: int
) -> Mapping[str, StateEntry] | None:
    """``tool_state`` as ``turn`` ended where the history can tell without counting the
    thread's turns (:meth:`~mcp_state_versions.walk.checkpoints.CheckpointHistory.
    ended_tool_state`, which a history may offer); ``None``: ask ``tool_state_at``."""
    if not isinstance(history, HasEndedToolState):
        return None
    return await history.ended_tool_state(thread_id, turn)


def _past_entry(snapshot: TurnSnapshot, key: str, turn: int, current_turn: int) -> Any:
    """What a turn's snapshot holds for ``key``: its entry, or the answer when it holds no
    entry to compare (not retained, not set yet, evicted then, a plain value)."""
    # A run saves checkpoints in the background, so a tool can be ahead of its thread's history
    # by the turn it is in. Those turns are held by the present, not missing from it.
    total = max(current_turn, snapshot.index.total)
    retained = snapshot.index.retained
    if turn > snapshot.index.total or snapshot.tool_state is None:
        return NotRetained(
            key=key,
            turn=turn,
            total=total,
            retained=range(retained.start if retained else snapshot.index.total + 1, total + 1),
        )
    return _entry_in(snapshot.tool_state, key, turn)


def _entry_in(tool_state: Mapping[str, Any], key: str, turn: int) -> Any:
    """``key``'s entry in ``tool_state`` as ``turn`` ended, or the answer when it holds no
    entry to compare (not set yet, evicted then, a plain value)."""
    past = tool_state.get(key)
    if past is None:
        return KeyNotSetYet(key=key, turn=turn, first_turn=None)
    if not is_entry(past):  # stored before the reducer adopted it
        return Found(key, turn, past, None, None, source="history", current=False)
    if "value" not in past:
        return ValueEvicted(key=key, turn=turn)  # evicted then too: no checkpoint holds it
    return past


async def resolve_past(
    key: str, turn: int, *, history: ThreadHistory, thread_id: str
) -> TurnAnswer:
    """What ``key`` held at the end of ``turn``, from the history alone: for a thread whose
    present cannot be read (:attr:`ThreadPresent.damage`), so there is no entry to ask first.

    The answers are those of :func:`resolve_turn`, except that a version's last turn is not
    searched for (``until`` is ``None``) and a key the turn did not hold is "not set yet",
    since without the present there is no telling it from a key the thread never had.
    """
    snapshot = await history.tool_state_at(thread_id, turn)
    if turn < 1 or turn > snapshot.index.total:
        return NeverHappened(key=key, turn=turn, total=snapshot.index.total)
    past = _past_entry(snapshot, key, turn, snapshot.index.total)
    if not is_entry(past):
        return past  # type: ignore[no-any-return]
    return Found(key, turn, past["value"], past["since"], None, source="history")


async def _version_end(
    entry: StateEntry,
    key: str,
    since: int,
    turn: int,
    history: ThreadHistory,
    thread_id: str,
) -> int | None:
    """The last turn of the version that began in ``since`` (not the current one).

    The entry knows the start of each version its ring still identifies. For an older one the
    history is searched for the last turn that still ended with it (``None`` when that part of
    history is no longer retained), so a history answer reads like a ring answer. A history
    may offer ``version_end`` to do this on one read of its lineage (``CheckpointHistory``
    does); otherwise each probe is a :meth:`ThreadHistory.tool_state_at`.
    """
    spans = version_spans(entry)
    for span in spans:
        if span.since == since:
            return span.until
    last_possible = spans[0].since - 1
    if isinstance(history, HasVersionEnd):
        return await history.version_end(thread_id, key, since, turn, last_possible)

    async def holds(probe: int) -> bool | None:
        snapshot = await history.tool_state_at(thread_id, probe)
        if snapshot.tool_state is None:
            return None
        found = snapshot.tool_state.get(key)
        return is_entry(found) and found["since"] == since

    return await gallop(holds, turn, last_possible)


VersionStatus = Literal["kept", "evicted", "pruned", "no_history", "unlisted"]


@dataclass(frozen=True, slots=True)
class VersionRow:
    """One line of a key's version list, oldest first.

    ``status`` says what a reader can have of it: ``"kept"`` (``value`` is it, from the entry's
    ring or from history, as ``source`` says), ``"evicted"`` (it was too large for session
    state's size budget, so no checkpoint holds it), ``"pruned"`` (its turns are no longer
    retained), ``"no_history"`` (the ring dropped it and this deployment keeps no turn
    history) or ``"unlisted"`` (older than a list cut at its ``limit``: list them as the key
    stood at the end of turn ``until``). A pruned, unreadable or unlisted row may stand for
    ``count`` versions whose own turns no reader can tell; its ``since`` is then ``None`` and
    ``until`` the last turn before the versions that are known. ``until`` is ``None`` for the
    current version.
    """

    since: int | None
    until: int | None
    status: VersionStatus
    value: Any = None
    count: int = 1
    writes: int = 1
    source: Literal["ring", "history"] | None = None

    @property
    def current(self) -> bool:
        return self.until is None and self.status != "pruned"

    def as_dict(self) -> dict[str, Any]:
        """The row as JSON data, as the command line and the HTTP API give it."""
        return {
            "since": self.since,
            "until": self.until,
            "current": self.current,
            "status": self.status,
            "count": self.count,
            "writes": self.writes,
            "source": self.source,
            "value": self.value,
        }


_PRUNED = object()


async def _entry_at(history: ThreadHistory, thread_id: str, key: str, turn: int) -> Any:
    """``key``'s entry as ``turn`` ended, ``None`` when unset, :data:`_PRUNED` when gone."""
    state = await _ended_state(history, thread_id, turn)
    if state is None:
        state = (await history.tool_state_at(thread_id, turn)).tool_state
        if state is None:
            return _PRUNED
    return state.get(key)


async def entry_at(history: ThreadHistory, thread_id: str, key: str, turn: int) -> Any:
    """``key``'s stored record as ``turn`` ended on this branch; ``None`` when it was not set
    then, or when the turn's checkpoints are no longer retained."""
    found = await _entry_at(history, thread_id, key, turn)
    return None if found is _PRUNED else found


def as_of(rows: Sequence[VersionRow], turn: int) -> list[VersionRow]:
    """A version list (oldest first) as it stood at the end of ``turn``: the versions begun by
    then, the last of them current then."""
    kept = [row for row in rows if row.since is None or row.since <= turn]
    if kept and kept[-1].since is not None and (kept[-1].until or turn) >= turn:
        kept[-1] = replace(kept[-1], until=None)
    return kept


async def resolve_versions(
    entry: StateEntry,
    key: str,
    *,
    current_turn: int,
    history: ThreadHistory | None = None,
    thread_id: str | None = None,
    limit: int | None = None,
) -> list[VersionRow]:
    """Every version ``key`` has held on this branch, oldest first, with its turns; with
    ``limit``, the newest ``limit`` rows, and the versions before them as one ``"unlisted"``
    row (a key rewritten every turn of a 10,000-turn thread has 10,000 versions: a reader
    pages through them, each page a bounded read).

    The ring answers for the versions it keeps. For each older one the history is read once:
    an entry's ``since`` is where its version began, so the entry as the turn before it ended
    is the version before, and that entry's own ring may hand over several more at no further
    read. ``k`` versions beyond the ring cost at most ``k`` reads (a search on the version
    count would cost ``k log turns``). Versions whose turns were pruned are one row saying so.
    """
    readable = history is not None and thread_id is not None
    retained: range | None = None

    async def retained_turns() -> range:
        nonlocal retained
        if retained is None:
            assert history is not None and thread_id is not None
            retained = (await history.turns(thread_id)).retained
        return retained

    if limit is not None and limit < 1:
        raise ValueError(f"limit must be at least 1, not {limit}")
    rows: list[VersionRow] = []  # newest first until the end
    full = (lambda: False) if limit is None else (lambda: len(rows) >= limit)
    cut = False
    spans = version_spans(entry)
    for span in reversed(spans):
        if full():
            cut = True
            break
        if span.kept:
            rows.append(
                VersionRow(span.since, span.until, "kept", span.value, 1, span.writes, "ring")
            )
            continue
        last = span.until if span.until is not None else current_turn
        if span.since > last:  # set after the last turn ended, then evicted: never stored
            rows.append(VersionRow(span.since, span.until, "evicted", writes=span.writes))
        elif not readable:
            rows.append(VersionRow(span.since, span.until, "no_history", writes=span.writes))
        elif not (turns := await retained_turns()) or last < turns.start:
            rows.append(VersionRow(span.since, span.until, "pruned", writes=span.writes))
        else:
            assert history is not None and thread_id is not None
            found = await _entry_at(history, thread_id, key, max(span.since, turns.start))
            held = is_entry(found) and "value" in found
            rows.append(
                VersionRow(
                    span.since,
                    span.until,
                    "kept" if held else "evicted",
                    found["value"] if held else None,
                    1,
                    span.writes,
                    "history" if held else None,
                )
            )
    remaining, cursor = entry["versions"] - len(spans), spans[0].since
    while remaining > 0 and not cut:
        if full():
            cut = True
            break
        before = cursor - 1
        if not readable:
            rows.append(VersionRow(None, before, "no_history", count=remaining))
            break
        turns = await retained_turns()
        if before < 1 or not turns or before < turns.start:
            rows.append(VersionRow(None, before, "pruned", count=remaining))
            break
        assert history is not None and thread_id is not None
        found = await _entry_at(history, thread_id, key, before)
        if found is _PRUNED:
            rows.append(VersionRow(None, before, "pruned", count=remaining))
            break
        if found is None:  # the count said more, the history has none: nothing more to list
            break
        if not is_entry(found):  # stored before the reducer adopted the key
            rows.append(VersionRow(None, before, "kept", found, remaining, 1, "history"))
            break
        older = version_spans(found)
        taken = 0
        for index, span in enumerate(reversed(older)):
            if index and not span.kept:
                break
            if full():
                cut = True
                break
            until = before if index == 0 else span.until
            status: VersionStatus = "kept" if span.kept else "evicted"
            source: Literal["history"] | None = "history" if span.kept else None
            value = span.value if span.kept else None
            rows.append(VersionRow(span.since, until, status, value, 1, span.writes, source))
            taken, cursor = taken + 1, span.since
        remaining = found["versions"] - taken
    if cut:
        listed = sum(row.count for row in rows)
        oldest = rows[-1].since
        assert oldest is not None  # a cut comes before any row of uncounted versions
        rows.append(VersionRow(None, oldest - 1, "unlisted", count=entry["versions"] - listed))
    rows.reverse()
    return rows


@dataclass(slots=True)
class KeyTimeline:
    """One key across the retained turns of a branch: where each of its versions began.

    ``set_from`` is the first retained turn whose end held the key (a version carried in from
    turns no longer retained begins before it); ``starts`` the retained turns in which a new
    version was written (the first of all is ``first_written``, when retained); ``evicted``
    the turns whose end held the key without its value (too large for the size budget).
    ``versions`` is how many versions it has had by the branch's last turn.
    """

    key: str
    set_from: int
    starts: list[int]
    first_written: int | None
    evicted: list[int]
    versions: int


@dataclass(frozen=True, slots=True)
class Timeline:
    """Every key of a branch over its turns: ``total`` turns, of which ``retained`` are kept."""

    total: int
    retained: range
    keys: list[KeyTimeline]


async def resolve_timeline(
    history: ThreadHistory, thread_id: str, *, visible: Callable[[str], bool] = lambda _: True
) -> Timeline:
    """The :class:`Timeline` of the thread's branch, for the keys ``visible`` admits.

    Each retained turn's ``tool_state`` is read once, oldest first: in one pass over the
    lineage where the history offers ``turn_states`` (``CheckpointHistory`` does), else one
    :meth:`ThreadHistory.tool_state_at` a turn.
    """
    rows: dict[str, KeyTimeline] = {}
    if isinstance(history, HasTurnStates):
        index, states = await history.turn_states(thread_id)
    else:
        index = await history.turns(thread_id)
        states = _one_by_one(history, thread_id, index.retained)
    async for turn, tool_state in states:
        for key, entry in versioned_entries(tool_state or {}).items():
            if not visible(key):
                continue
            row = rows.get(key)
            if row is None:
                row = rows[key] = KeyTimeline(key, turn, [], None, [], entry["versions"])
            if entry["since"] == turn:
                row.starts.append(turn)
                if entry["versions"] == 1:
                    row.first_written = turn
            if "value" not in entry:
                row.evicted.append(turn)
            row.versions = entry["versions"]
    return Timeline(index.total, index.retained, [rows[key] for key in sorted(rows)])


async def _one_by_one(
    history: ThreadHistory, thread_id: str, turns: range
) -> AsyncIterator[tuple[int, Mapping[str, Any] | None]]:
    for turn in turns:
        yield turn, (await history.tool_state_at(thread_id, turn)).tool_state
