"""The HTTP API's response bodies."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field, JsonValue

from .problems import RetainedTurns

__all__ = [
    "KeySummary",
    "KeyTimelineItem",
    "KeyValue",
    "KeyVersions",
    "StateListing",
    "ThreadItem",
    "ThreadList",
    "TimelineBody",
    "Turns",
    "VersionItem",
]


class KeySummary(BaseModel):
    key: str
    shape: str
    tool: str | None
    turn: int
    since: int
    versions: int
    evicted: bool


class StateListing(BaseModel):
    thread_id: str
    turn: int
    keys: list[KeySummary]


class KeyValue(BaseModel):
    thread_id: str
    key: str
    turn: int | None
    value: JsonValue
    since: int | None
    until: int | None
    source: Literal["current", "ring", "history"]
    #: How many versions the key has had; ``None`` when the thread's present could not be
    #: read and the value came from history alone.
    versions: int | None


class VersionItem(BaseModel):
    """One version, oldest first (see :class:`mcp_state_versions.walk.resolve.VersionRow`)."""

    #: Its first turn; ``None`` for a row standing for ``count`` versions whose turns are gone.
    since: int | None
    #: Its last turn; ``None`` for the current version.
    until: int | None
    current: bool
    #: ``kept`` (``value`` is it), ``evicted`` (never stored: too large), ``pruned`` (its turns
    #: are no longer retained), ``no_history`` (beyond the ring, and no turn history here),
    #: ``unlisted`` (older than this page: ``KeyVersions.next_turn`` lists them).
    status: Literal["kept", "evicted", "pruned", "no_history", "unlisted"]
    count: int
    writes: int
    source: Literal["ring", "history"] | None
    value: JsonValue


class KeyVersions(BaseModel):
    thread_id: str
    key: str
    #: How many versions the key had by ``as_of_turn`` (now, when that is ``None``).
    versions: int
    #: The value held then (``None`` when evicted).
    value: JsonValue
    #: The list as it stood at the end of this turn (``?turn=``); ``None``: as it stands now.
    as_of_turn: int | None = None
    items: list[VersionItem]
    #: Pass as ``?turn=`` for the versions older than this page; ``None`` when it has them all.
    next_turn: int | None = None


class ThreadItem(BaseModel):
    thread_id: str
    turns: int | None = Field(description="None when the thread's stored state is damaged")
    last_write: datetime | None
    stored_bytes: int
    damage: str | None = Field(None, description="Why the thread cannot be read, if it cannot")


class ThreadList(BaseModel):
    threads: list[ThreadItem]
    #: Pass as ``?before=`` for the next page; ``None`` on the last.
    next: str | None


class KeyTimelineItem(BaseModel):
    """One key over the retained turns (see
    :class:`mcp_state_versions.walk.resolve.KeyTimeline`)."""

    key: str
    #: The first retained turn whose end held the key.
    set_from: int
    #: The retained turns in which a new version was written.
    starts: list[int]
    #: The turn its first version was written, when that turn is retained.
    first_written: int | None
    #: Turns whose end held the key without its value (too large for the size budget).
    evicted: list[int]
    versions: int
    #: The earliest turn the key's own recent versions still answer (its ring), retained or
    #: not; ``None`` when not even its current value is held.
    known_from: int | None = None


class TimelineBody(BaseModel):
    thread_id: str
    total: int
    retained: RetainedTurns | None
    keys: list[KeyTimelineItem]


class Turns(BaseModel):
    thread_id: str
    total: int
    retained: RetainedTurns | None


class ToolCallItem(BaseModel):
    """A tool call of a turn: the tool, its arguments, what it returned, the keys it wrote."""

    id: str
    tool: str
    args: dict[str, JsonValue]
    result: str | None
    keys: list[str]


class TurnConversationBody(BaseModel):
    """What a turn was about: the user's message that opened it, its tool calls, the reply that
    ended it (``null`` where the messages no longer hold them)."""

    thread_id: str
    turn: int
    user: str | None
    reply: str | None
    calls: list[ToolCallItem]
    open: bool = Field(
        default=False, description="The turn has not ended (a call waits for a person)."
    )
    summary: str | None = Field(
        default=None,
        description="A summary written in the turn (by a summarization middleware), never "
        "the turn's user message.",
    )
