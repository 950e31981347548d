"""The turn clock: which turn a thread is in, kept in state rather than counted from messages.

Everything the library answers is "the value at the end of turn N", so what a turn *is* decides
whether those answers are true. Counting human messages in ``messages`` is not a definition that
survives real agents: trimming removes old human messages, LangChain's
``SummarizationMiddleware`` replaces the whole list with a summary and a few recent messages,
and either silently renumbers every turn after it. The clock is instead a small record the
``tool_state`` reducer keeps under :data:`CLOCK_KEY`:

* **Turn N is the N-th run that brought a new user message into the thread on its branch.**
  :func:`open_turn` (a graph node, run first) ticks the clock when the newest human message is
  one it has not counted; :func:`close_turn` (run last) marks the turn ended
  (:func:`ticks_around` gives a model node both, which is how ``build_agent`` runs the clock
  without steps of its own). Both are plain
  writes into ``tool_state``, so a checkpoint carries the clock like any other value and a fork
  from the end of turn K goes on from K: its next user message is turn K+1 on the new branch.
* **It only moves forward, one turn at a time.** A run with no new user message, resuming an
  interrupt (``Command(resume=...)``, which does not pass through the first node) or an
  operator's ``update_state`` never tick it, and the reducer refuses a tick that skips turns.
  Clock writes merge as a join (the later turn wins; once a turn is closed it stays closed), so
  replaying them in any batching gives the same clock.
* **Open or closed tells a write's turn.** With the clock in its own state, the reducer places
  every write without looking at messages or at the writer's stamp: during turn N (open) a
  write belongs to N; after turn N ended (closed) it belongs to N+1, because no turn ≤ N ended
  holding it. That is what keeps an operator's edit between turns from rewriting what a
  finished turn ran on.

The record also carries the reducer's running totals (``seq``, ``bytes``, ``newest``), so a
write costs O(1) in the number of keys; they are the reducer's business, not a reader's.

Threads written before the clock existed have no record. For those, and only those, the turn
is the number of human messages in ``messages`` (:func:`count_turns`), which trimming or
summarization breaks; the first turn such a thread runs with the clock starts it from that
count.
"""

import base64
import hashlib
from collections.abc import Mapping, Sequence
from typing import Any, NotRequired, TypedDict

from langchain_core.messages import AnyMessage, BaseMessage, HumanMessage
from langchain_core.runnables import RunnableConfig

__all__ = [
    "CLOCK_KEY",
    "POSITIONS_PER_TURN",
    "ClockRecord",
    "clock_of",
    "close_turn",
    "count_turns",
    "current_turn",
    "end_of_turn",
    "entries_of",
    "keys_dropped",
    "marked_index",
    "message_mark",
    "open_turn",
    "past_end",
    "position",
    "state_field",
    "ticks_around",
    "turn_at",
    "turn_of_tool_state",
    "values_of",
]

CLOCK_KEY = "__clock__"
"""The ``tool_state`` key of the clock record. It cannot be a published key (those have three
non-empty ``/``-separated parts), and every reader of this library hides it."""


class ClockRecord(TypedDict):
    """The clock, as stored under :data:`CLOCK_KEY` in ``tool_state``.

    * ``turn``: turns begun on this branch (``None``: the clock has never ticked, and writes
      are placed by their stamps, as before the clock existed);
    * ``open``: whether turn ``turn`` is still running;
    * ``message``: the user message that began it; ``seen``: the last message when it ended
      (together they tell a new user message from one already counted), each as its
      :func:`message_mark` (records written before marks hold the ids themselves);
    * ``late`` (only when true): a write arrived after turn ``turn`` ended, so this state is
      no longer the one the turn ended with;
    * ``counted``, ``first``: marks of the user messages that opened the last few turns and
      the first one, so a user message seen again after a trim is not counted again;
    * ``seq``, ``bytes``, ``newest``: the reducer's totals (write counter, JSON bytes held,
      newest turn any write was placed in);
    * ``writes``, ``written``: key writes merged and about the bytes they took as stored writes
      (what :mod:`mcp_state_versions.storage.tool_state` sets its snapshot cadence by);
    * ``ring_size``, ``ring_bytes``, ``budget``: the reducer's bounds, so a reader rebuilding
      stored state replays its writes with them;
    * ``dropped`` (only once an ``Overwrite`` dropped keys): how many did on this branch, so
      a key written again later, or missing now, is read as of earlier turns from history,
      and a persistent subgraph's older state gives way to the parent's.
    """

    turn: int | None
    open: bool
    message: NotRequired[str | None]
    seen: NotRequired[str | None]
    late: NotRequired[bool]
    counted: NotRequired[list[str]]
    first: NotRequired[str]
    seq: NotRequired[int]
    bytes: NotRequired[int]
    writes: NotRequired[int]
    written: NotRequired[int]
    ring_size: NotRequired[int]
    ring_bytes: NotRequired[int]
    budget: NotRequired[int]
    newest: NotRequired[int]
    dropped: NotRequired[int]


def state_field(state: Any, name: str) -> Any:
    """Read a field of graph state, whether the state is a dict or an object with attributes."""
    if state is None:
        return None
    if isinstance(state, Mapping):
        return state.get(name)
    return getattr(state, name, None)


def count_turns(messages: Sequence[AnyMessage | Any] | None) -> int:
    """Human messages in ``messages``: the turn of a thread that has no clock.

    This is the documented fallback for threads written before the clock existed, and nothing
    else. Trimming or summarizing messages lowers it and shifts turn numbers.
    """
    if not messages:
        return 0
    return sum(1 for message in messages if _is_human(message))


def _is_human(message: Any) -> bool:
    if isinstance(message, HumanMessage):
        return True
    if isinstance(message, BaseMessage):
        return False
    return isinstance(message, Mapping) and message.get("type", message.get("role")) in (
        "human",
        "user",
    )


def _message_id(message: Any) -> str | None:
    value = message.get("id") if isinstance(message, Mapping) else getattr(message, "id", None)
    return None if value is None else str(value)


def message_mark(message_id: str) -> str:
    """What the clock records of a message id: 12 characters (72 bits of its BLAKE2b digest).

    The clock writes two message ids a turn (the user message that opened it, the last one
    when it ended), and ``tool_state`` is stored as writes, so their length is stored every
    turn: a LangChain run id is 47 characters, a quarter of what a turn changing two small
    values stores. The clock only ever asks whether a message is one it recorded, which a mark
    answers as well as the id (two ids sharing a mark: one chance in 2**72).
    """
    digest = hashlib.blake2b(message_id.encode(), digest_size=9).digest()
    return base64.urlsafe_b64encode(digest).decode()


def _recorded(message_id: str | None, *recorded: Any) -> bool:
    """Whether ``message_id`` is among ``recorded`` (marks, or ids in records older than
    marks)."""
    if message_id is None:
        return False
    found = (message_mark(message_id), message_id)
    return any(item in found for item in recorded)


def _mark(message_id: str | None) -> str | None:
    return None if message_id is None else message_mark(message_id)


def marked_index(messages: Sequence[Any], mark: str, end: int | None = None) -> int | None:
    """The index of the last message before ``end`` whose id the clock recorded as ``mark``
    (a mark, or the id itself in records older than marks); ``None``: none is."""
    for index in range(len(messages) if end is None else end, 0, -1):
        message_id = getattr(messages[index - 1], "id", None)
        if message_id is not None and mark in (message_mark(message_id), message_id):
            return index - 1
    return None


def clock_of(tool_state: Any) -> ClockRecord | None:
    """The clock record of a ``tool_state``, or ``None`` when it has none."""
    if not isinstance(tool_state, Mapping):
        return None
    record = tool_state.get(CLOCK_KEY)
    return record if isinstance(record, Mapping) else None  # type: ignore[return-value]


def entries_of(tool_state: Any) -> dict[str, Any]:
    """``tool_state`` without the clock record: the keys tools published."""
    if not isinstance(tool_state, Mapping):
        return {}
    return {key: entry for key, entry in tool_state.items() if key != CLOCK_KEY}


def values_of(state: Any) -> dict[str, Any]:
    """The values of session state as a plain ``{key: value}`` dict: what a reader of graph
    state (``invoke``'s result, ``get_state().values``) usually wants.

    ``state`` is graph state (a dict with ``tool_state``) or ``tool_state`` itself. Raw
    ``tool_state`` holds, under each key, the entry this library keeps (the value, the tool
    that wrote it, its versions and ring), and the turn clock under :data:`CLOCK_KEY`; this
    leaves out the clock and gives each key's current value. A key whose value was evicted
    (over the state's budget) is left out too: it has no value to give.
    """
    if isinstance(state, Mapping) and "tool_state" in state and CLOCK_KEY not in state:
        state = state["tool_state"]
    return {
        key: entry["value"] if isinstance(entry, Mapping) and "versions" in entry else entry
        for key, entry in entries_of(state).items()
        if not (isinstance(entry, Mapping) and "versions" in entry and "value" not in entry)
    }


def turn_of_tool_state(tool_state: Any) -> int | None:
    """The turn a ``tool_state`` was in, from its clock (``None``: no clock; count messages)."""
    record = clock_of(tool_state)
    if record is None:
        return None
    turn = record.get("turn")
    return turn if isinstance(turn, int) and not isinstance(turn, bool) else None


def keys_dropped(tool_state: Any) -> bool:
    """Whether an ``Overwrite`` ever dropped keys of this ``tool_state`` (its clock counts
    them): a key missing now may still be read as of an earlier turn."""
    record = clock_of(tool_state)
    return record is not None and "dropped" in record


POSITIONS_PER_TURN = 4
"""Clock positions are integers, four to a turn: ``4N`` while turn N runs, ``4N + 1`` once it
ended, ``4N + 2`` once something was written after that. Integers because a position must
compare exactly however large the turn: a float loses whole turns past 2**53."""


def position(values: Mapping[str, Any]) -> int:
    """Where a state (a checkpoint's channel values) stands on the clock, comparable in order.

    See :data:`POSITIONS_PER_TURN`. A checkpoint walk finds the end of turn N as the newest
    checkpoint at or below :func:`end_of_turn` ``(N)``. For a state without a clock it is the
    human-message count's turn, open (the fallback for threads older than the clock).
    """
    tool_state = values.get("tool_state")
    turn = turn_of_tool_state(tool_state)
    if turn is None:
        return POSITIONS_PER_TURN * count_turns(values.get("messages"))
    record: Mapping[str, Any] = clock_of(tool_state) or {}
    if record.get("open"):
        return POSITIONS_PER_TURN * turn
    return POSITIONS_PER_TURN * turn + (2 if record.get("late") else 1)


def end_of_turn(turn: int) -> int:
    """The highest :func:`position` a state at the end of turn ``turn`` can have."""
    return POSITIONS_PER_TURN * turn + 1


def turn_at(found: int) -> int:
    """The turn a :func:`position` lies in."""
    return found // POSITIONS_PER_TURN


def past_end(found: int) -> bool:
    """Whether a :func:`position` lies after its turn's end (something was written since)."""
    return found % POSITIONS_PER_TURN > 1


def current_turn(state: Any) -> int:
    """The turn graph ``state`` is in: its clock, or for a thread without one, its human count."""
    turn = turn_of_tool_state(state_field(state, "tool_state"))
    if turn is not None:
        return turn
    return count_turns(state_field(state, "messages"))


def _in_root(config: RunnableConfig | None) -> bool:
    """Whether a task runs in the root graph: its namespace is its own task (``node:id``)
    only, where a subgraph's task adds ``|node:id`` parts."""
    namespace = ((config or {}).get("configurable") or {}).get("checkpoint_ns") or ""
    return "|" not in namespace


def open_turn(
    state: Any, config: RunnableConfig | None = None, *, bounds: Mapping[str, int] | None = None
) -> dict[str, Any]:
    """Graph node: tick the clock if the newest user message has not been counted yet.

    Run it first in a graph (``START -> open_turn -> ...``). It returns an empty update when
    there is nothing to count: no user message, one already counted, or nothing newer than the
    last message of the previous turn. Several user messages sent in one input are one turn.

    ``bounds`` are the reducer's ring and budget bounds (its ``bounds`` attribute), carried in
    the tick. The reducer records them in state, but a state stored as writes is rebuilt from
    the writes alone, and before its first snapshot only this write can tell a reader that does
    not know the graph (the HTTP API, the command line) which bounds to replay them with.
    ``build_agent`` and ``SessionStateMiddleware`` pass them; a graph using the default reducer
    need not.
    """
    messages = list(state_field(state, "messages") or [])
    tool_state = state_field(state, "tool_state")
    record = clock_of(tool_state)
    newest = next((i for i in range(len(messages) - 1, -1, -1) if _is_human(messages[i])), None)
    if newest is None:
        return {}
    message_id = _message_id(messages[newest])
    if record is not None and record.get("turn") is not None:
        if _recorded(
            message_id, record.get("message"), record.get("first"), *(record.get("counted") or ())
        ):
            return {}  # counted already: the messages were trimmed back to it
        seen = record.get("seen")
        if seen is not None and any(
            _recorded(_message_id(m), seen) for m in messages[newest + 1 :]
        ):
            return {}  # the newest human message is older than the last turn's end
        turn = int(record["turn"]) + 1  # type: ignore[arg-type]
    else:
        # First turn with the clock: a fresh thread starts at 1; an older thread continues
        # from its human count (the fallback), never behind a turn its entries recorded.
        newest_entry = int(record.get("newest", 0)) if record is not None else 0
        turn = max(count_turns(messages), newest_entry + 1, 1)
    tick: dict[str, Any] = {"turn": turn, "open": True, "message": _mark(message_id)}
    if bounds and (record is None or "ring_size" not in record):
        tick.update(bounds)  # once: from then on the state records them
    return {"tool_state": {CLOCK_KEY: tick}}


def close_turn(state: Any, config: RunnableConfig | None = None) -> dict[str, Any]:
    """Graph node: mark the current turn ended. Run it last (``... -> close_turn -> END``).

    Inside a subgraph it does nothing: the turn belongs to the graph at the root, which may
    still have work to do in it after the subgraph returns.
    """
    record = clock_of(state_field(state, "tool_state"))
    if record is None or record.get("turn") is None or not _in_root(config):
        return {}
    messages = state_field(state, "messages") or []
    seen = _mark(_message_id(messages[-1])) if messages else None
    return {"tool_state": {CLOCK_KEY: {"turn": record["turn"], "open": False, "seen": seen}}}


def ticks_around(
    state: Any,
    reply: Any,
    config: RunnableConfig | None = None,
    *,
    bounds: Mapping[str, int] | None = None,
    opens: bool = True,
    ends: bool | None = None,
) -> dict[str, Any]:
    """The clock writes of a model node that runs the clock itself, as one ``tool_state``
    update: :func:`open_turn`'s tick for the input it answers, and :func:`close_turn`'s when
    ``reply`` ends the turn (it calls no tools). ``{}`` when neither applies.

    :func:`~mcp_state_versions.agent.build.build_agent` does this instead of running the two as
    nodes of their own: each node is a step, and each step is a checkpoint written, which for
    a short turn was a third of its time. ``reply`` needs an id (the node gives it one), since
    the close records the last message seen. ``opens=False`` only closes (a graph that opens
    the turn before its model node, as ``SessionStateMiddleware`` does); ``ends`` says whether
    the reply ends the turn where its tool calls do not tell (a structured response given
    through a tool call ends the agent).
    """
    opened = (
        open_turn(state, config, bounds=bounds).get("tool_state", {}).get(CLOCK_KEY)
        if opens
        else None
    )
    tick = dict(opened) if opened else None
    if ends is None:
        ends = not getattr(reply, "tool_calls", None)
    if ends and _in_root(config):
        record = tick or clock_of(state_field(state, "tool_state"))
        if record is not None and record.get("turn") is not None:
            seen = _mark(_message_id(reply))
            tick = {**(tick or {}), "turn": record["turn"], "open": False, "seen": seen}
    return {"tool_state": {CLOCK_KEY: tick}} if tick else {}
