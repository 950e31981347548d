"""The version index one entry carries: how it advances on a write, and what it can answer.

A key in ``tool_state`` holds one current value. This module adds, on the entry itself, the
count of values the key has held and a bounded ring of the values before the current one. Both
are maintained when a write is merged, so that

* a listing can say ``rewritten, 3 versions`` without reading anything but the entry, and
* ``inspect_state(key, turn=N)`` for a recent turn is a lookup in the ring instead of a walk
  over checkpoint history, whose cost grows with the whole conversation.

What counts as a version is deliberately narrow, because the marker is only worth reading if it
means something changed:

* A *version* is a value the key held **at the end of a turn**. Two writes in one turn leave one
  version (the later); a value republished unchanged in a later turn is the same version.
* Values are compared by their canonical JSON text (sorted keys, no whitespace), so ``1`` and
  ``True`` differ, and so do ``1`` and ``1.0``; key order inside an object does not matter.

Each version is identified by the first turn whose end held it (``since`` on the entry, ``turn``
on a ring item). The value at the end of turn N is then the newest version whose first turn is
``<= N``; versions are contiguous, so no end turn needs storing.

The ring keeps the *values* of the newest ``ring_size`` prior versions that also fit in
``ring_bytes``; older ones keep their turn, seq and digest only (so a lookup knows the walk is
needed and the same-turn rule below stays exact), and past ``max(ring_size, 1)`` items they are
dropped and only counted. ``versions == len(ring) + 1`` says the ring reaches back to the key's
first version; anything else means older versions exist that only checkpoint history holds.

Everything here is a pure function of its arguments: no clock, no randomness, no mutation. The
reducer relies on that for LangGraph's replay law (see :mod:`mcp_state_versions.state.reducer`).
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    from .reducer import PriorVersion, StateEntry

__all__ = [
    "RingBeforeFirst",
    "RingHit",
    "RingLookup",
    "RingMiss",
    "RingPolicy",
    "VersionSpan",
    "advance",
    "answers_from",
    "canonical",
    "ring_reaches_first",
    "same_value",
    "strip_ring_values",
    "value_at_turn",
    "version_spans",
]


def canonical(value: Any) -> tuple[str, int]:
    """Return ``(digest, size)`` of a JSON value's canonical text.

    The digest decides whether two values are the same version; the size (UTF-8 bytes) is what
    the ring and the ``tool_state`` budget count. Both come from one serialization so a write is
    serialized once.
    """
    data = _text_json(value) if type(value) is str else None
    if data is None:
        text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        data = text.encode()
    return hashlib.blake2b(data, digest_size=12).hexdigest(), len(data)


def _text_json(value: str) -> bytes | None:
    """A string's canonical JSON from orjson: the same bytes as ``json.dumps`` gives (a
    property test checks it over any text), 40 times sooner for a 200 KB text. Not used for
    other values: orjson writes some floats differently (``1e-05`` as ``0.00001``), and a
    digest must not change for a value already stored. ``None`` where orjson refuses the text
    (a lone surrogate), which the standard encoder then reports as before."""
    try:
        return orjson.dumps(value)
    except orjson.JSONEncodeError:
        return None


def same_value(a: Any, b: Any) -> bool:
    """Whether two JSON values have the same canonical text, without serializing either.

    Python's ``==`` runs in C but calls ``1``, ``1.0`` and ``True`` equal; so a value it finds
    equal is checked again for types (and the sign of zero), which :func:`canonical` tells
    apart. Most values that differ are told apart by ``==`` alone. Used to leave an unchanged
    republish out of the writes without serializing every value republished. Two texts, most
    published values, need no more than ``==``.
    """
    if type(a) is str and type(b) is str:
        return a == b
    try:
        if a != b:
            return False
    except Exception:
        return False
    return _same_types(a, b)


def _same_types(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    if type(a) is dict:
        return all(_same_types(value, b[key]) for key, value in a.items())
    if type(a) is list:
        return all(map(_same_types, a, b))
    if type(a) is float:
        return math.copysign(1.0, a) == math.copysign(1.0, b)
    return True


@dataclass(frozen=True, slots=True)
class RingPolicy:
    """How much of a key's past its entry keeps.

    ``ring_size`` prior versions keep their value, as long as together they fit in
    ``ring_bytes`` (newest first). ``ring_size=0`` keeps no prior values: every turn read older
    than the current version goes to checkpoint history.
    """

    ring_size: int = 8
    ring_bytes: int = 256 * 1024

    def __post_init__(self) -> None:
        if self.ring_size < 0 or self.ring_bytes < 0:
            raise ValueError(
                f"ring_size and ring_bytes must be >= 0, got {self.ring_size} and {self.ring_bytes}"
            )

    @property
    def slots(self) -> int:
        """Ring items kept at all: at least one, so the previous version's identity survives."""
        return max(self.ring_size, 1)


def advance(
    entry: StateEntry | None,
    *,
    value: Any,
    tool: str | None,
    seq: int,
    turn: int,
    policy: RingPolicy,
    identity: tuple[str, int] | None = None,
) -> StateEntry:
    """Return the entry after a write of ``value`` at ``turn`` with write number ``seq``.

    ``turn`` must already be effective (never older than ``entry["turn"]``; the reducer sees to
    that). Four cases, each keeping ``versions`` equal to the number of distinct consecutive
    turn-end values:

    1. first write: one version, since this turn;
    2. same value as now: not a new version (seq, turn and tool still advance);
    3. current value was set in this same turn: it never reached a turn end, so it is replaced;
       if the new value equals the version before it, the two merge back into that version;
    4. otherwise: the current value becomes the newest ring item and the write a new version.

    ``identity`` is the value's ``(digest, size)`` when the caller has it already.
    """
    digest, size = identity if identity is not None else canonical(value)
    head: dict[str, Any] = {
        "value": value,
        "tool": tool,
        "seq": seq,
        "turn": turn,
        "digest": digest,
        "size": size,
    }
    if entry is None:
        return _held({**head, "since": turn, "versions": 1, "writes": 1, "ring": []})
    for mark in ("adopted", "earlier"):  # what came before either stays history's
        if mark in entry:
            head[mark] = entry[mark]
    ring: list[PriorVersion] = list(entry.get("ring", []))
    writes = entry.get("writes", 1)
    if digest == entry["digest"]:
        return _held({**entry, **head, "writes": writes + (entry["since"] == turn)})
    if entry["since"] == turn:
        if ring and ring[-1]["digest"] == digest:
            previous = ring.pop()
            return _held(
                {
                    **head,
                    "since": previous["turn"],
                    "versions": entry["versions"] - 1,
                    "writes": previous.get("writes", 1),
                    "ring": ring,
                }
            )
        return _held({**entry, **head, "writes": writes + 1, "ring": ring})
    retired: dict[str, Any] = {
        "turn": entry["since"],
        "seq": entry["seq"],
        "digest": entry["digest"],
        "writes": writes,
    }
    if "value" in entry:
        retired["value"] = entry["value"]
        retired["size"] = entry["size"]
    ring.append(retired)  # type: ignore[arg-type]
    return _held(
        {
            **head,
            "since": turn,
            "versions": entry["versions"] + 1,
            "writes": 1,
            "ring": _trim(ring, policy),
        }
    )


def _held(entry: dict[str, Any]) -> StateEntry:
    """Stamp ``bytes``: what the entry holds in values, so the budget sums one field per key."""
    held = entry["size"] if "value" in entry else 0
    for item in entry["ring"]:
        held += item.get("size", 0)
    entry["bytes"] = held
    return entry  # type: ignore[return-value]


def _trim(ring: list[PriorVersion], policy: RingPolicy) -> list[PriorVersion]:
    """Apply the count and byte bounds, newest first; see the module docstring."""
    ring = ring[-policy.slots :]
    budget = policy.ring_bytes
    kept: list[PriorVersion] = []
    for position, item in enumerate(reversed(ring)):
        if "value" in item:
            if position < policy.ring_size and item["size"] <= budget:
                budget -= item["size"]
            else:
                item = _without_value(item)
                budget = -1  # once one value is out, every older one is out too
        kept.append(item)
    kept.reverse()
    return kept


def _without_value(item: PriorVersion) -> PriorVersion:
    return {k: v for k, v in item.items() if k not in ("value", "size")}  # type: ignore[return-value]


def strip_ring_values(entry: StateEntry, count: int) -> StateEntry:
    """Return ``entry`` with the values of its ``count`` oldest valued ring items removed.

    Used by the ``tool_state`` budget, which gives up old versions before current values.
    """
    ring = list(entry.get("ring", []))
    for index, item in enumerate(ring):
        if count <= 0:
            break
        if "value" in item:
            ring[index] = _without_value(item)
            count -= 1
    return _held({**entry, "ring": ring})


def ring_reaches_first(entry: StateEntry) -> bool:
    """Whether the ring still holds (at least the identity of) the key's first version.

    Never for an adopted value, nor for a key written again after an ``Overwrite`` dropped
    keys (``earlier``): what the key held before is known only to checkpoint history.
    """
    return (
        entry["versions"] == len(entry.get("ring", [])) + 1
        and "adopted" not in entry
        and "earlier" not in entry
    )


@dataclass(frozen=True, slots=True)
class VersionSpan:
    """One version the entry knows of: its turns and, when kept, its value.

    ``until`` is ``None`` for the current version, which lasts until now; ``kept`` is false when
    the ring's bounds dropped the value (only checkpoint history has it then).
    """

    since: int
    until: int | None
    kept: bool
    value: Any
    writes: int = 1

    @property
    def current(self) -> bool:
        return self.until is None


def version_spans(entry: StateEntry) -> list[VersionSpan]:
    """The versions the entry knows of, oldest first; the last is the current value.

    ``entry["versions"] - len(result)`` older versions exist that only history holds.
    """
    items: list[PriorVersion | StateEntry] = [*entry.get("ring", []), entry]
    starts = [item["turn"] for item in entry.get("ring", [])] + [entry["since"]]
    return [
        VersionSpan(
            since=starts[index],
            until=None if index == len(items) - 1 else starts[index + 1] - 1,
            kept="value" in item,
            value=item.get("value"),
            writes=item.get("writes", 1),
        )
        for index, item in enumerate(items)
    ]


@dataclass(frozen=True, slots=True)
class RingHit:
    """The entry itself answers: ``value`` was the key's value at the end of the turn asked.

    ``since`` is the first turn of that version, ``until`` its last (``None`` for the current
    version, which lasts until now).
    """

    value: Any
    since: int
    until: int | None


@dataclass(frozen=True, slots=True)
class RingBeforeFirst:
    """The key was first set in ``first_turn``, after the turn asked."""

    first_turn: int


@dataclass(frozen=True, slots=True)
class RingMiss:
    """The entry does not hold that version's value; only checkpoint history can answer.

    ``oldest_in_ring`` is the earliest turn the entry can still answer for itself.
    """

    oldest_in_ring: int


RingLookup = RingHit | RingBeforeFirst | RingMiss


def answers_from(entry: StateEntry) -> int | None:
    """The earliest turn from which on the entry alone answers every turn with a value (its
    current version and the ring's kept versions before it, back to the first gap); ``None``
    when not even the current value is held. A turn retention removed from history can still
    be read from there."""
    earliest = None
    for span in reversed(version_spans(entry)):
        if not span.kept:
            break
        earliest = span.since
    return earliest


def value_at_turn(entry: StateEntry, turn: int) -> RingLookup:
    """Answer "what did this key hold at the end of ``turn``" from the entry alone.

    The caller has already checked that ``turn`` is a turn the thread has had.
    """
    spans = version_spans(entry)
    kept = [span.since for span in spans if span.kept]
    oldest = kept[0] if kept else entry["since"]
    for span in reversed(spans):
        if span.since <= turn:
            if not span.kept:
                return RingMiss(oldest_in_ring=oldest)
            return RingHit(value=span.value, since=span.since, until=span.until)
    if ring_reaches_first(entry):
        return RingBeforeFirst(first_turn=spans[0].since)
    return RingMiss(oldest_in_ring=oldest)
