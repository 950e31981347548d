"""The HTTP API's response bodies."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, JsonValue

from .problems import RetainedTurns

__all__ = ["KeySummary", "KeyValue", "KeyVersions", "StateListing", "Turns", "VersionItem"]


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


class Turns(BaseModel):
    thread_id: str
    total: int
    retained: RetainedTurns | None
