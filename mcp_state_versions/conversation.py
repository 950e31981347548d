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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .clock import marked_index
from .publish import PUBLISHED

__all__ = ["ToolCallRecord", "TurnConversation", "turn_conversation", "turn_span"]


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


def turn_span(messages: Sequence[Any], record: Mapping[str, Any] | None) -> tuple[int | None, int]:
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
        found = marked_index(messages, seen, len(messages))
        if found is not None:
            end = found + 1
    opening = record.get("message")
    return (None if opening is None else marked_index(messages, opening, end)), end


def turn_conversation(
    messages: Sequence[Any], record: Mapping[str, Any] | None = None
) -> TurnConversation:
    """The conversation of the turn ``messages`` (the list as the turn ended) end with, as
    the turn's clock ``record`` at that checkpoint bounds it (see :func:`turn_span`)."""
    opened, end = turn_span(messages, record)
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
    return TurnConversation(user=user, reply=reply, calls=calls, open=still_open)


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
