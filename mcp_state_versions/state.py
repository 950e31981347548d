"""Session state: the ``tool_state`` channel, its entries, and the reducer that merges writes.

Tools publish values into ``tool_state``, a dict from key (``<toolset>/<tool>/<field>``) to a
:class:`StateEntry`. The entry is plain JSON-compatible data rather than a pydantic model or a
dataclass, so that every checkpointer (in-memory, SQLite, PostgreSQL, or one written later)
serializes it without any type being registered, and a state reloaded from a checkpoint is
exactly the state the run held. Pydantic is used at the edges instead: a write entering the
reducer is validated there, once.

The reducer, :func:`merge_tool_state`, is where versions are recorded (see
:mod:`mcp_state_versions.versions`). LangGraph requires reducers to be deterministic and
batching-invariant, ``r(r(s, xs), ys) == r(s, xs + ys)``, because it replays recorded writes in
whatever batches it likes when it rebuilds state; nothing checks that, and a reducer that breaks
it rebuilds a state the run never held. This one is built to hold it by construction: an update
is a sequence of single-key writes, each merged by the same step in order, and the step reads
nothing but the state so far and the write (no clock, no randomness, no global counter). The
property tests check the law against a reference model.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, NotRequired, TypedDict

from langchain_core.messages import AnyMessage, BaseMessage, HumanMessage
from langgraph.graph.message import add_messages
from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError

from .versions import RingPolicy, advance, strip_ring_values

__all__ = [
    "DEFAULT_BUDGET_BYTES",
    "TURN_METADATA_KEY",
    "PriorVersion",
    "SessionState",
    "StateEntry",
    "ToolStateError",
    "count_turns",
    "make_merge_tool_state",
    "make_session_state",
    "merge_tool_state",
    "state_field",
]

TURN_METADATA_KEY = "mcp_state_versions_turn"
"""Checkpoint metadata key under which :func:`mcp_state_versions.agent.run_turn` records the
turn a run belongs to: a hint that lets a checkpoint walk find turns without loading values."""

DEFAULT_BUDGET_BYTES = 8 * 1024 * 1024
"""Total JSON bytes ``tool_state`` may hold (current values plus ring values)."""


class PriorVersion(TypedDict):
    """A value the key held before its current one, kept in the entry's ring.

    ``turn`` is the first turn whose end held the value (the version lasted until the next
    item's ``turn`` minus one). ``value`` and ``size`` are absent when the ring's bounds dropped
    the value but kept the version's identity.
    """

    turn: int
    seq: int
    digest: str
    value: NotRequired[Any]
    size: NotRequired[int]


class StateEntry(TypedDict):
    """One key of ``tool_state``. Plain data: every checkpointer stores it as is.

    * ``value``: the current value (absent only if the budget evicted it; see the reducer).
    * ``tool``: the tool that last wrote it.
    * ``seq``: write order across the whole ``tool_state`` (stamped by the reducer).
    * ``turn``: the turn of the last write, 1-based, counted as human messages.
    * ``since``: the first turn whose end held the current value.
    * ``versions``: how many values the key has held at turn ends, the current one included.
    * ``ring``: prior versions, oldest first (see :class:`PriorVersion`).
    * ``digest``/``size``: identity and JSON size of the current value; ``bytes``: JSON bytes the
      entry holds in values, for the budget.
    """

    value: NotRequired[Any]
    tool: str | None
    seq: int
    turn: int
    since: int
    versions: int
    ring: list[PriorVersion]
    digest: str
    size: int
    bytes: int


class ToolStateError(ValueError):
    """A write to ``tool_state`` that cannot be merged; the message says what to send instead."""


class _Write(BaseModel):
    """The shape of one write: ``{"value": ..., "tool": ..., "turn": ...}``.

    Anything else an entry carries (``seq``, ``versions``, ``ring`` ...) is computed by the
    reducer, so a caller that sends back a whole entry is not trusted for those fields.
    """

    model_config = ConfigDict(extra="ignore", frozen=True)
    value: JsonValue
    tool: str | None = None
    turn: int | None = Field(default=None, ge=0)


def state_field(state: Any, name: str) -> Any:
    """Read a field of graph state, whether the state is a dict or an object with attributes."""
    if state is None:
        return None
    if isinstance(state, Mapping):
        return state.get(name)
    return getattr(state, name, None)


def count_turns(messages: Sequence[AnyMessage | Any] | None) -> int:
    """The turn a conversation is in: its number of human messages.

    This is the library's one definition of a turn. A host that trims old human messages out of
    state lowers this count, and turn numbers shift with it; trim tool output instead, or keep
    the human messages.
    """
    if not messages:
        return 0
    return sum(
        1
        for message in messages
        if isinstance(message, HumanMessage)
        or (not isinstance(message, BaseMessage) and _is_human_dict(message))
    )


def _is_human_dict(message: Any) -> bool:
    return isinstance(message, Mapping) and message.get("type", message.get("role")) in (
        "human",
        "user",
    )


def make_merge_tool_state(
    ring_size: int = 8,
    ring_bytes: int = 256 * 1024,
    budget_bytes: int = DEFAULT_BUDGET_BYTES,
) -> Callable[[Mapping[str, StateEntry] | None, Mapping[str, Any] | None], dict[str, StateEntry]]:
    """Build a ``tool_state`` reducer with its own ring bounds and total budget.

    ``ring_size`` prior values are kept per key while they fit in ``ring_bytes``;
    ``budget_bytes`` bounds all values held. Over budget, ring values go first (oldest write
    first, across keys), then current values of the least recently written keys; the key being
    written is never evicted. An evicted current value leaves its entry in place without
    ``value``, so a reader is told it was evicted and can still read it with ``turn=`` from
    checkpoint history, rather than the key silently vanishing.

    A write is ``{"value": <JSON>, "tool": str | None, "turn": int | None}``. A write
    without ``turn`` (an operator's ``update_state``, say) is taken as part of the newest turn
    any entry records, and one without ``tool`` keeps the entry's tool. A write stamped older
    than its entry's last write counts as part of that last write's turn. Time never runs
    backwards inside an entry, so neither can corrupt the ring. Stamp ``turn`` explicitly to
    place an operator's correction in a given turn.

    Raises :class:`ToolStateError` for a ``tool_state`` or write of the wrong shape, naming the
    key and what to send instead.
    """
    policy = RingPolicy(ring_size=ring_size, ring_bytes=ring_bytes)
    if budget_bytes <= 0:
        raise ValueError(f"budget_bytes must be positive, got {budget_bytes}")

    def merge_tool_state(
        current: Mapping[str, StateEntry] | None, update: Mapping[str, Any] | None
    ) -> dict[str, StateEntry]:
        merged: dict[str, StateEntry] = dict(_as_state(current, "current tool_state"))
        if not update:
            return merged
        update = _as_state(update, "tool_state update")
        seq = max((entry["seq"] for entry in merged.values()), default=0)
        newest_turn = max((entry["turn"] for entry in merged.values()), default=0)
        held = sum(entry["bytes"] for entry in merged.values())
        for key, raw in update.items():
            write = _validate_write(key, raw)
            seq += 1
            previous = merged.get(key)
            turn = newest_turn if write.turn is None else write.turn
            if previous is not None:
                turn = max(turn, previous["turn"])
                held -= previous["bytes"]
            tool = write.tool if write.tool is not None or previous is None else previous["tool"]
            entry = advance(
                previous, value=write.value, tool=tool, seq=seq, turn=turn, policy=policy
            )
            merged[key] = entry
            held += entry["bytes"]
            newest_turn = max(newest_turn, turn)
            if held > budget_bytes:
                held = _enforce_budget(merged, held, budget_bytes, protect=key)
        return merged

    merge_tool_state.__doc__ = (
        f"Merge a tool_state update (ring_size={ring_size}, ring_bytes={ring_bytes}, "
        f"budget_bytes={budget_bytes}); see make_merge_tool_state."
    )
    return merge_tool_state


def _as_state(value: Any, what: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ToolStateError(
            f"{what} must be a dict of key -> entry, got {type(value).__name__}; "
            "publish values with mcp_state_versions.publish or send "
            '{"<key>": {"value": ..., "turn": N}}'
        )
    return value


def _validate_write(key: Any, raw: Any) -> _Write:
    if not isinstance(key, str) or not key:
        raise ToolStateError(f"tool_state keys are non-empty strings, got {key!r}")
    if not isinstance(raw, Mapping) or "value" not in raw:
        raise ToolStateError(
            f"tool_state write for {key!r} must be a dict with a 'value' field "
            f'(e.g. {{"value": ..., "turn": 3}}), got {type(raw).__name__}'
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
            "first, as mcp_state_versions.publish does."
        ) from None


def _enforce_budget(merged: dict[str, StateEntry], held: int, budget: int, *, protect: str) -> int:
    """Evict until ``held <= budget``: ring values oldest first, then unprotected current values.

    Deterministic: the order is by ``seq`` (and key, to break no tie that can occur, since seq is
    unique), never by dict or time order.
    """
    ring_values = sorted(
        (item["seq"], key)
        for key, entry in merged.items()
        for item in entry["ring"]
        if "value" in item
    )
    for _, key in ring_values:
        if held <= budget:
            return held
        before = merged[key]["bytes"]
        merged[key] = strip_ring_values(merged[key], 1)
        held += merged[key]["bytes"] - before
    currents = sorted(
        (entry["seq"], key) for key, entry in merged.items() if key != protect and "value" in entry
    )
    for _, key in currents:
        if held <= budget:
            break
        entry = merged[key]
        evicted = {k: v for k, v in entry.items() if k != "value"}
        evicted["bytes"] = entry["bytes"] - entry["size"]
        merged[key] = evicted  # type: ignore[assignment]
        held -= entry["size"]
    return held


merge_tool_state = make_merge_tool_state()
"""The default reducer: ring of 8 prior values within 256 KiB per key, 8 MiB in all."""


def make_session_state(
    reducer: Callable[..., dict[str, StateEntry]] = merge_tool_state,
) -> type:
    """Build the graph state schema (``messages`` + ``tool_state``) around a reducer.

    :data:`SessionState` is this with the default reducer; build your own for other ring bounds.
    """
    return TypedDict(  # type: ignore[operator]
        "SessionState",
        {
            "messages": Annotated[list[AnyMessage], add_messages],
            "tool_state": Annotated[dict[str, StateEntry], reducer],
        },
    )


SessionState = make_session_state()
"""Graph state of an agent with session state: messages plus versioned ``tool_state``."""
