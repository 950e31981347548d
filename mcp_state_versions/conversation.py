"""A turn's conversation: the user message that opened it, the tool calls it made, and the
reply that ended it.

A person reading a thread's values asks what each turn was about and which call wrote a value.
The messages at the end of a turn (:meth:`~mcp_state_versions.checkpoint_walk.CheckpointHistory.
messages_at_end_of`, on the branch being read) answer both: the turn's opening message is the
last user message, and what follows it is the turn's own calls and reply. A call's result
message names the keys the library published from it (its artifact), which ties a cell of the
timeline to the call that wrote it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .publish import PUBLISHED

__all__ = ["ToolCallRecord", "TurnConversation", "turn_conversation"]


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
    (``None`` where the messages no longer hold them: a trim, a summary)."""

    user: str | None
    reply: str | None
    calls: list[ToolCallRecord]


def turn_conversation(messages: Sequence[Any]) -> TurnConversation:
    """The conversation of the turn ``messages`` (the list as the turn ended) end with."""
    opened = max((i for i, m in enumerate(messages) if _kind(m) == "human"), default=None)
    own = list(messages if opened is None else messages[opened + 1 :])
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
    return TurnConversation(user=user, reply=reply, calls=calls)


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
