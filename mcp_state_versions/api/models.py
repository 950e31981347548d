"""The HTTP API's response bodies."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, JsonValue

from .problems import RetainedTurns

__all__ = [
    "KeySummary",
    "KeyValue",
    "KeyVersions",
    "StateListing",
    "ThreadItem",
    "ThreadList",
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
    since: int
    until: int | None
    current: bool
    kept: bool
    value: JsonValue


class KeyVersions(BaseModel):
    thread_id: str
    key: str
    versions: int
    older_not_kept: int
    items: list[VersionItem]


class ThreadItem(BaseModel):
    thread_id: str
    turns: int
    last_write: datetime | None
    stored_bytes: int


class ThreadList(BaseModel):
    threads: list[ThreadItem]
    #: Pass as ``?before=`` for the next page; ``None`` on the last.
    next: str | None


class Turns(BaseModel):
    thread_id: str
    total: int
    retained: RetainedTurns | None
