"""A turn's conversation: the user message that opened it, the tool calls it made, and the
reply that ended it.

A person reading a thread's values asks what each turn was about and which call wrote a value.
One definition answers, on every path that drives a thread (``run_turn``, ``invoke``, the Agent
Server, a resumed interrupt): the conversation of turn N is read from the checkpoint where the
clock closed turn N on the branch being read, and it runs from the user message the clock
counted as turn N (the clock record's ``message``) to the last message the turn saw (its
``seen``), both recorded by the clock as marks of their ids. Nothing is inferred from
message types: a checkpoint that already holds the next turn's user message (the input step
of the next run, before its clock ticks) ends the turn where the clock closed it, and a
summary a middleware wrote is never taken for the user's message. A call's result message
names the keys the library published from it (its artifact), which ties a cell of the
timeline to the call that wrote it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..state.clock import marked_index, message_mark
from ..state.reducer import PUBLISHED

__all__ = [
    "CONVERSATION_KEY",
    "MAX_CONVERSATION_TURNS",
    "ToolCallRecord",
    "TurnConversation",
    "TurnsError",
    "parse_turns",
    "removed_turns",
    "turn_bounds",
    "turn_conversation",
]


@dataclass(frozen=True, slots=True)
class ToolCallRecord:
    """One tool call of a turn: the tool, its arguments, the text it returned, and the keys of
    session state published from it."""

    id: str
    tool: str
    args: dict[str, Any]
    result: str | None = None
    keys: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class TurnConversation:
    """What a turn was: ``user`` opened it, ``calls`` were made in it, ``reply`` ended it
    (``None`` where the messages no longer hold them: a trim, a summary). ``open``: the turn
    has not ended (a call waits for a person), so its reply is still to come."""

    user: str | None
    reply: str | None
    calls: list[ToolCallRecord]
    open: bool = False
    summary: str | None = None
    """A summary written in the turn (a message after the user's that no person sent: a
    summarization middleware's), which is never the turn's user message."""


def turn_bounds(
    messages: Sequence[Any], record: Mapping[str, Any] | None
) -> tuple[int | None, int]:
    """Where the turn whose clock ``record`` is given lies in ``messages``: the index of the
    user message the clock counted for it (``None``: no longer held) and the end (exclusive)
    of its own messages. Without a record (a thread the clock never ran on) the turn is the
    last human message and what follows it."""
    if record is None:
        opened = max((i for i, m in enumerate(messages) if _kind(m) == "human"), default=None)
        return opened, len(messages)
    end = len(messages)
    seen = record.get("seen")
    if not record.get("open") and seen is not None:
        found = marked_index(messages, seen)
        if found is not None:
            end = found + 1
    opening = record.get("message")
    return (None if opening is None else marked_index(messages, opening, end)), end


def turn_conversation(
    messages: Sequence[Any], record: Mapping[str, Any] | None = None
) -> TurnConversation:
    """The conversation of the turn ``messages`` (the list as the turn ended) end with, as
    the turn's clock ``record`` at that checkpoint bounds it (see :func:`turn_bounds`)."""
    opened, end = turn_bounds(messages, record)
    if opened is None and record is not None:
        # the opening message is gone (a summary, a trim): the turn's own messages are those
        # after the last message of another kind than the turn's own (calls, results, reply)
        start = end
        while start > 0 and _kind(messages[start - 1]) in ("ai", "tool"):
            start -= 1
        own = list(messages[start:end])
    else:
        own = list(messages[:end] if opened is None else messages[opened + 1 : end])
    results = {getattr(m, "tool_call_id", None): m for m in own if _kind(m) == "tool"}
    calls = []
    reply = None
    for message in own:
        if _kind(message) != "ai":
            continue
        for call in getattr(message, "tool_calls", None) or []:
            answer = results.get(call.get("id"))
            calls.append(
                ToolCallRecord(
                    id=str(call.get("id")),
                    tool=str(call.get("name")),
                    args=dict(call.get("args") or {}),
                    result=None if answer is None else _text(answer),
                    keys=_published_keys(answer),
                )
            )
        if not getattr(message, "tool_calls", None):
            reply = _text(message)
    user = None if opened is None else _text(messages[opened])
    still_open = bool(record is not None and record.get("open"))
    if still_open:
        reply = None
    summary = next((_text(m) for m in own if _kind(m) == "human"), None)
    return TurnConversation(user=user, reply=reply, calls=calls, open=still_open, summary=summary)


def _kind(message: Any) -> str | None:
    return getattr(message, "type", None)


def _text(message: Any) -> str:
    text = getattr(message, "text", None)  # the message's text blocks, joined
    return str(text) if isinstance(text, str) else str(getattr(message, "content", ""))


def _published_keys(message: Any) -> list[str]:
    artifact = getattr(message, "artifact", None)
    found = artifact.get(PUBLISHED) if isinstance(artifact, dict) else None
    keys = found.get("keys") if isinstance(found, dict) else None
    return [str(key) for key in keys] if isinstance(keys, list) else []


CONVERSATION_KEY = "@conversation"
"""The key ``inspect_state`` reads a turn's conversation under (``turn=N`` or ``"A-B"``)."""

MAX_CONVERSATION_TURNS = 5
"""The most turns one ``@conversation`` read returns: a range is for comparing a few turns,
and each turn is a read of history."""

RESULT_CHARS = 1_000
"""How much of a call's result a conversation read shows before cutting it, with a note that
names the ``path=`` reading the rest."""

_TURNS_TEXT = re.compile(r"\s*([0-9]{1,12})\s*(?:[-–]\s*([0-9]{1,12})\s*)?", re.ASCII)


class TurnsError(ValueError):
    """A ``turn=`` for ``@conversation`` that names no turns; the message says what to send."""


def parse_turns(turn: Any) -> range:
    """The turns a ``@conversation`` read asks for: ``3``, ``"3"`` or ``"3-5"`` (at most
    :data:`MAX_CONVERSATION_TURNS` turns)."""
    found: tuple[int, int] | None = None
    if isinstance(turn, int) and not isinstance(turn, bool):
        found = (turn, turn)
    elif isinstance(turn, float) and turn.is_integer() and abs(turn) < 1e15:
        found = (int(turn), int(turn))
    elif isinstance(turn, str) and (match := _TURNS_TEXT.fullmatch(turn)):
        first = int(match.group(1))
        found = (first, int(match.group(2) or first))
    if found is None or found[0] < 1 or found[1] < found[0]:
        raise TurnsError(
            f"{CONVERSATION_KEY} needs turn=N (1 for the first user message) or a range "
            f'turn="A-B", got {turn!r}.'
        )
    if found[1] - found[0] + 1 > MAX_CONVERSATION_TURNS:
        raise TurnsError(
            f"turn={turn!r} asks for {found[1] - found[0] + 1} turns; read at most "
            f'{MAX_CONVERSATION_TURNS} at once (turn="{found[0]}-{found[0] + 4}").'
        )
    return range(found[0], found[1] + 1)


def conversation_value(found: TurnConversation, turn: int, *, cut: bool) -> dict[str, Any]:
    """A turn's conversation as the JSON a model reads (``path=`` and ``pattern=`` work on
    it); with ``cut``, long results are shortened, each saying which ``path=`` reads it."""
    calls = []
    for index, record in enumerate(found.calls):
        result = record.result
        if cut and result is not None and len(result) > RESULT_CHARS:
            rest = len(result) - RESULT_CHARS
            result = (
                f"{result[:RESULT_CHARS]}… ({rest:,} more characters: read the whole result "
                f'with key="{CONVERSATION_KEY}", turn={turn}, path="calls[{index}].result")'
            )
        calls.append({"id": record.id, "tool": record.tool, "args": record.args, "result": result})
    value: dict[str, Any] = {"turn": turn, "user": found.user, "calls": calls, "reply": found.reply}
    if found.open:
        value["open"] = True
    if found.summary is not None:
        value["summary"] = found.summary
    return value


def removed_turns(messages: Sequence[Any], record: Mapping[str, Any] | None) -> range:
    """The turns whose opening user messages ``messages`` no longer hold (a summary or a trim
    took them out), counted from turn 1, by the clock's marks of the turns it counted
    (``range(1, 1)``: none)."""
    if record is None or not isinstance(record.get("turn"), int):
        return range(1, 1)
    first = record.get("first")
    if not isinstance(first, str):
        return range(1, 1)
    total = int(record["turn"])
    counted = [mark for mark in record.get("counted") or [] if isinstance(mark, str)]
    # the user messages' marks (and ids, as older records hold them), each hashed once: the
    # listing asks at every key="*", over the whole conversation
    users = {m.id for m in messages if _kind(m) == "human" and isinstance(m.id, str)}
    marks = users | {message_mark(message_id) for message_id in users}
    held = [mark in marks for mark in counted]
    start = 1 if first not in marks else 2  # a trim that keeps the first
    if start == 2 and all(held):
        return range(1, 1)
    # the counted marks are the last turns' openings, oldest first: the turns before the
    # oldest one still held left the messages (a summary or a trim takes the oldest first)
    for position, kept in enumerate(held):
        if kept:
            return range(start, max(total - (len(counted) - 1 - position), start))
    return range(start, total + 1)


def removed_turns_note(messages: Sequence[Any], record: Mapping[str, Any] | None) -> str:
    """The listing's line saying which turns left the messages, or ``""`` when none did."""
    removed = removed_turns(messages, record)
    if not removed:
        return ""
    which = (
        f"Turn {removed.start} was"
        if len(removed) == 1
        else (f"Turns {removed.start}–{removed.stop - 1} were")
    )
    return (
        f"\n({which} summarized or trimmed out of this conversation's messages: read one with "
        f'key="{CONVERSATION_KEY}", turn=N.)'
    )
