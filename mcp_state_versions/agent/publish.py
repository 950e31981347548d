"""How a tool puts its results into session state.

A tool that returns a large payload as its message fills the model's context with data the model
mostly does not need to read, and the payload is gone from view once the conversation is trimmed.
Publishing instead writes each field into ``tool_state`` under ``<toolset>/<tool>/<field>`` and
leaves a one-line breadcrumb as the tool's message, ``[state updated: gazet/get_aoi/bbox, ...]``,
so the model knows what changed and reads it with ``inspect_state`` when it needs it.

The write carries the tool's name and the turn it ran in, taken from the turn clock in the
tool's runtime state (the reducer places writes by the clock anyway; the stamp serves graphs
that run without one).

The breadcrumb also says what the write did to a key's past, at the moment it happens, so a
model learns of a rewrite without listing state: a key whose value an earlier turn ended with is
marked ``replaces the value it held since turn N``; and when several calls in one step write the
same keys (a model issuing parallel calls), each reply says which call's value the keys keep,
since they run concurrently and only the last in call order is left in state. It names at most
:data:`BREADCRUMB_KEYS` keys of each kind and counts the rest: it stays in the conversation for
good, and a tool writing five hundred fields should not cost the model five hundred keys' worth
of tokens on every later call.

**Only what changed is written.** A value republished unchanged (the same canonical JSON as the
key holds now) is left out of the update: it would be no new version, and since ``tool_state``
is stored as writes (:mod:`mcp_state_versions.storage.tool_state`) it would be stored again for
nothing, and replayed at every later run start. The breadcrumb lists such keys as ``unchanged``.
When other calls to the same tool run in the same step, every value is written, so that call order
still decides which value the keys keep.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import ormsgpack
from langchain_core.messages import ToolMessage
from langgraph.prebuilt import ToolRuntime
from langgraph.types import Command
from pydantic_core import PydanticSerializationError, to_jsonable_python

from ..state.clock import clock_of, current_turn, state_field, turn_of_tool_state
from ..state.credentials import (
    SECRET_NAMES,
    _kept,
    _secret_names,
    secret_name_text,
    withheld,
)
from ..state.reducer import DEFAULT_BUDGET_BYTES, PUBLISHED, ToolStateError, is_entry, vouch
from ..state.versions import canonical, same_value
from ..storage.messages import calling_several
from ..wording.render import dumps

__all__ = [
    "BREADCRUMB_KEYS",
    "SECRET_NAMES",
    "Publication",
    "breadcrumb",
    "noted_messages",
    "publication",
    "publication_of",
    "publish",
    "secret_name_text",
    "state_key",
    "tool_state_writes",
    "withheld",
]

_SCALARS = frozenset({str, int, float, bool, type(None)})
_ABSENT = object()


BREADCRUMB_KEYS = 5
"""Keys a breadcrumb names of each kind (updated, unchanged, not kept) before ``+ N more``."""


def is_key_part(part: Any) -> bool:
    """Whether ``part`` can be one part of a key: non-empty text without ``/``."""
    return isinstance(part, str) and bool(part) and "/" not in part


def holds_fields(value: Any) -> bool:
    """Whether ``value`` is a non-empty mapping whose keys can all be fields of a key: what
    capture publishes field by field, rather than as one ``result``."""
    return isinstance(value, Mapping) and bool(value) and all(is_key_part(k) for k in value)


def state_key(toolset: str, tool: str, field: str) -> str:
    """The key ``<toolset>/<tool>/<field>``; each part must be non-empty and free of ``/``."""
    for label, part in (("toolset", toolset), ("tool", tool), ("field", field)):
        _check_part(label, part)
    return f"{toolset}/{tool}/{field}"


def _check_part(label: str, part: Any) -> None:
    if not is_key_part(part):
        raise ValueError(f"{label} must be a non-empty string without '/', got {part!r}")


def tool_state_writes(
    toolset: str, tool: str, fields: Mapping[str, Any], *, turn: int | None
) -> dict[str, dict[str, Any]]:
    """The ``tool_state`` update that publishes ``fields``: ``{key: {value, tool, turn}}``.

    Values are converted to JSON data first (pydantic models, dataclasses, dates, tuples and
    the like become what their JSON would be), so what is stored is what a checkpointer
    reloads. A value with no JSON form raises ``TypeError`` naming its field.
    """
    _check_part("toolset", toolset)
    _check_part("tool", tool)
    writes: dict[str, dict[str, Any]] = {}
    for field, value in fields.items():
        if not is_key_part(field):
            _check_part("field", field)
        writes[f"{toolset}/{tool}/{field}"] = {
            "value": _json_data(toolset, tool, field, value),
            "tool": tool,
            "turn": turn,
        }
    return writes


MAX_DEPTH = 200
"""The deepest nesting of dicts and lists a published value may have.

A checkpoint stores a value some levels further down (in its entry, in a ring, in a snapshot),
and the savers' serializer stops at 255 levels: a deeper value would fail the run as its
checkpoint is stored, long after the tool returned. So it is refused when it is published
(:class:`ValueTooDeep`), and capture stores nothing of it and says so."""


class ValueTooDeep(TypeError):
    """A value nested more than :data:`MAX_DEPTH` levels deep, which cannot be stored."""


_DEPTH_PROBE = 255 - MAX_DEPTH
"""Lists wrapped around a value so the serializer's own limit (255 levels) stops at
:data:`MAX_DEPTH` of the value's: it tells the depth in C, as fast as it packs."""


def _json_data(toolset: str, tool: str, field: str, value: Any, *, depth: bool = True) -> Any:
    """``value`` as JSON data (see :func:`tool_state_writes`), checked to be at most
    :data:`MAX_DEPTH` levels deep unless ``depth=False`` (a caller that checks only the values
    it goes on to store: :func:`_check_depth`)."""
    if type(value) in _SCALARS:  # JSON data already (pydantic returns them as they are)
        return value
    try:
        data = to_jsonable_python(value)
    except PydanticSerializationError as error:
        raise TypeError(
            f"cannot publish field {field!r} of {toolset}/{tool}: {type(value).__name__} has "
            f"no JSON form ({error}); publish a dict, list, string or number instead"
        ) from None
    except (ValueError, RecursionError):  # pydantic's own depth limit
        raise _too_deep(toolset, tool, field) from None
    if depth:
        _check_depth(toolset, tool, field, data)
    return data


def _check_depth(toolset: str, tool: str, field: str, data: Any) -> None:
    """Raise :class:`ValueTooDeep` for JSON data nested more than :data:`MAX_DEPTH` deep."""
    if not _shallow(data):
        raise _too_deep(toolset, tool, field)


def _too_deep(toolset: str, tool: str, field: str) -> ValueTooDeep:
    return ValueTooDeep(
        f"cannot publish field {field!r} of {toolset}/{tool}: it is nested more than "
        f"{MAX_DEPTH} levels deep, deeper than a checkpoint can store; publish its parts, or "
        "flatten it"
    )


def _shallow(data: Any) -> bool:
    """Whether JSON data is nested at most :data:`MAX_DEPTH` levels deep."""
    if type(data) is not dict and type(data) is not list:
        return True
    probe = data
    for _ in range(_DEPTH_PROBE):
        probe = [probe]
    try:
        ormsgpack.packb(probe)
    except TypeError as error:
        if "Recursion limit" in str(error):
            return False
        raise
    return True


DEFAULT_INLINE_LIMIT = 1000
"""Published and captured values whose JSON is at most this many characters stay in the
tool's message after the breadcrumb, so the model can act on a small result without reading
state; larger ones are replaced by the breadcrumb alone."""


def inlined(breadcrumb: str, fields: Mapping[str, Any], limit: int) -> str:
    """The breadcrumb, followed by the fields' JSON when it is at most ``limit`` characters.

    A large result is told without serializing it (:func:`_longer_than`): fifty values of
    200 KB would otherwise be written out as 10 MB of JSON at every publish, to be dropped.
    """
    if _longer_than(fields, limit):
        return breadcrumb
    payload = dumps(fields)
    return f"{breadcrumb} {payload}" if len(payload) <= limit else breadcrumb


def _longer_than(value: Any, limit: int) -> bool:
    """Whether ``value``'s JSON is surely longer than ``limit`` characters, by a count that
    never exceeds the real length (text without its escapes, numbers as Python writes them)
    and stops as soon as it passes the limit: at most about ``limit`` characters looked at."""
    left = limit
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            left -= len(item) + 2
        elif isinstance(item, Mapping):
            left -= 2 * len(item) + 1
            for key, inner in item.items():
                left -= len(str(key)) + 2
                stack.append(inner)
        elif isinstance(item, list | tuple):
            left -= len(item) + 1
            stack.extend(item)
        else:
            left -= len(str(item))
        if left < 0:
            return True
    return False


def publish(
    runtime: ToolRuntime,
    toolset: str,
    tool: str,
    fields: Mapping[str, Any],
    *,
    note: str | None = None,
    secret_names: str | None = SECRET_NAMES,
    inline_limit: int = DEFAULT_INLINE_LIMIT,
) -> Command:
    """Return the ``Command`` a tool returns to publish ``fields`` into ``tool_state``.

    Fields whose names look like credentials (:data:`SECRET_NAMES`, at any depth) are never
    stored; the breadcrumb says which were withheld. ``secret_names`` is another pattern, or
    ``None`` to store every field.

    The tool's message becomes ``[state updated: <key>, ...]``, then the fields' JSON when it
    is at most ``inline_limit`` characters (as a captured result's; ``0`` leaves it out), then
    ``note`` if given (a short summary the model should see right away).

    ``runtime`` is the tool's ``ToolRuntime``; declare it ``runtime: LeanToolRuntime``
    (:mod:`mcp_state_versions.agent.runtime`), which LangChain does not dump, with the whole message
    list, on every call.

    Example::

        @tool
        def get_aoi(place: str, runtime: LeanToolRuntime) -> Command:
            '''Find the area of interest for a place name.'''
            found = gazetteer.lookup(place)
            return publish(runtime, "gazet", "get_aoi", {"bbox": found.bbox, "name": found.name})
    """
    if not fields:
        raise ValueError("publish needs at least one field")
    published = publication_of(toolset, tool, fields, runtime, secret_names=secret_names)
    text = inlined(published.text, published.fields, inline_limit) if inline_limit else None
    content = " ".join(part for part in (text or published.text, note) if part)
    return Command(update=published.update(ToolMessage(content, tool_call_id=runtime.tool_call_id)))


@dataclass(frozen=True, slots=True)
class Publication:
    """What publishing a set of writes comes to: the writes to store and the breadcrumb."""

    #: The writes whose values changed (an unchanged republish is not stored again).
    writes: dict[str, dict[str, Any]]
    #: The tool's reply (see :func:`breadcrumb`).
    text: str
    #: Each changed value's ``(digest, size)``, as computed for the breadcrumb.
    identities: Mapping[str, tuple[str, int]] = dataclasses.field(default_factory=dict)
    #: The fields published, secret-named ones left out (:func:`publication_of`).
    fields: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def update(self, message: ToolMessage) -> dict[str, Any]:
        """The graph update that publishes: the changed writes, if any, and ``message``, which
        records the keys it wrote (see :func:`noted_messages`)."""
        for key, write in self.writes.items():
            if key in self.identities:  # so the merge need not serialize the value again
                vouch(write, self.identities[key])
        if self.writes:
            written = {PUBLISHED: {"keys": list(self.writes)}}
            message = message.model_copy(update={"artifact": written})
        return {**({"tool_state": self.writes} if self.writes else {}), "messages": [message]}


def publication_of(
    toolset: str,
    tool: str,
    fields: Mapping[str, Any],
    runtime: ToolRuntime,
    *,
    secret_names: str | None = SECRET_NAMES,
) -> Publication:
    """What publishing ``fields`` as ``<toolset>/<tool>/<field>`` comes to: what
    :func:`withheld`, :func:`tool_state_writes` and :func:`publication` give in turn, in one
    pass over the fields.

    A tool republishing five hundred fields, two of them changed, passed over all five
    hundred three times (withholding, converting, comparing) and built five hundred writes to
    keep two, which was most of what a publish cost. Here each field is checked, withheld or
    converted, and compared with the value its key holds at once, and a write is built only
    for a value that changed.
    """
    _check_part("toolset", toolset)
    _check_part("tool", tool)
    state = runtime.state
    _require_channel(state)  # publish and capture alike: never a breadcrumb for nothing
    siblings = _siblings_note(runtime)
    present = {} if siblings else _entries(state)
    secret = _secret_names(secret_names) if secret_names else None
    turn = current_turn(state)
    kept: dict[str, Any] = {}
    gone: list[str] = []
    writes: dict[str, dict[str, Any]] = {}
    unchanged: list[str] = []
    prefix = f"{toolset}/{tool}/"
    # The loop runs once a field, five hundred times for a large tool, so the usual case (a
    # text field name, a scalar value, a dict entry) is told inline rather than by calls.
    for field, value in fields.items():
        if secret is not None and secret[field]:
            gone.append(field)
            continue
        if type(field) is not str or not field or "/" in field:
            _check_part("field", field)
        if type(value) not in _SCALARS:
            # JSON data first, so the secret filter sees inside models and dataclasses; its
            # depth is checked below, for a value that is stored (not for one unchanged)
            value = _json_data(toolset, tool, field, value, depth=False)
            if secret is not None:
                value = _kept(value, field, secret, gone)
        kept[field] = data = value
        key = prefix + field
        entry = present.get(key)
        if entry is not None and (
            data == entry.get("value", _ABSENT) and is_entry(entry)
            if type(data) is str and type(entry) is dict
            else _holds(entry, data)
        ):
            unchanged.append(key)
        else:
            if type(data) is not str:
                _check_depth(toolset, tool, field, data)
            writes[key] = {"value": data, "tool": tool, "turn": turn}
    withheld_keys = [f"{toolset}/{tool}/{path}" for path in gone]
    return _publication(writes, unchanged, state, turn, siblings, withheld_keys, fields=kept)


def publication(
    writes: Mapping[str, Mapping[str, Any]],
    runtime: ToolRuntime,
    *,
    withheld: Sequence[str] = (),
) -> Publication:
    """Which of ``writes`` to store, and the breadcrumb that says what they did.

    An unchanged republish is told by comparing values; each changed value is serialized once,
    for its identity and size: that tells a rewrite and a value too large for the budget.
    """
    state = runtime.state
    siblings = _siblings_note(runtime)
    present = {} if siblings else _entries(state)
    unchanged = [key for key, write in writes.items() if _holds(present.get(key), write["value"])]
    same = set(unchanged)
    changed = {key: write for key, write in writes.items() if key not in same}
    return _publication(changed, unchanged, state, current_turn(state), siblings, withheld)


def _holds(entry: Any, value: Any) -> bool:
    """Whether ``entry`` holds ``value`` now (compared without serializing: a tool
    republishing five hundred values should not pay for five hundred serializations)."""
    return is_entry(entry) and "value" in entry and same_value(value, entry["value"])


def _publication(
    writes: Mapping[str, Mapping[str, Any]],
    unchanged: Sequence[str],
    state: Any,
    turn: int,
    siblings: str | None,
    withheld: Sequence[str],
    *,
    fields: Mapping[str, Any] | None = None,
) -> Publication:
    """The publication of ``writes``, the values that changed, beside the keys republished
    ``unchanged``, in ``turn`` (the state's, computed once a publish): each changed value is
    serialized once, for its identity and size."""
    changed = {key: canonical(write["value"]) for key, write in writes.items()}
    dropped = _not_kept(changed, state)
    kept = {key: changed[key] for key in changed if key not in dropped}
    parts = [f"[state updated: {_described(kept, state, turn)}]" if kept else ""]
    if unchanged:
        parts.append(f"[unchanged: {_named(unchanged)}]")
    if dropped:
        budget = _budget(state)
        parts.append(
            f"[not kept: {_named(dropped)} — too large for session state's "
            f"{budget:,}-byte budget together with this call's other values; they are not "
            "stored, and no turn can read them back]"
        )
    if withheld:
        parts.append(f"[withheld: {_named(list(withheld))} — secret-named fields are never stored]")
    parts.append(siblings or "")
    clocked = turn_of_tool_state(state_field(state, "tool_state")) is not None
    present = _entries(state)
    return Publication(
        writes={
            key: _stored(writes[key], changed[key], present.get(key), clocked) for key in changed
        },
        text=" ".join(part for part in parts if part),
        identities=changed,
        fields=fields if fields is not None else {},
    )


IDENTITY_FROM_BYTES = 1024
"""Values of at least this many JSON bytes are written with their identity (digest, size).

The reducer checks it when the write is merged, and a replay of the stored write (every run
start, every read of the past) then need not serialize the value again, which for a large value
is most of a replay's cost. A small value's identity would cost more bytes stored than the
serialization it saves."""


def _stored(
    write: Mapping[str, Any], identity: tuple[str, int], held: Any, clocked: bool
) -> dict[str, Any]:
    """The write as it is stored: only what the reducer would not know without it.

    ``tool_state`` is stored as writes, so every field of a write is stored every time the key
    changes. The turn stamp is left out once the turn clock runs (the reducer places writes by
    the clock and ignores stamps), and the tool's name when the key's entry already names it
    (a write without one keeps the entry's); what the reducer makes of the write is the same.
    A large value carries its identity (:data:`IDENTITY_FROM_BYTES`).
    """
    stored = dict(write)
    if clocked:
        stored.pop("turn", None)
    if is_entry(held) and held.get("tool") == stored.get("tool"):
        stored.pop("tool", None)
    if identity[1] >= IDENTITY_FROM_BYTES:
        stored.update(digest=identity[0], size=identity[1])
    return stored


def breadcrumb(writes: Mapping[str, Mapping[str, Any]], runtime: ToolRuntime) -> str:
    """The reply a tool gives for ``writes``: ``[state updated: <keys>]``, saying which keys
    replace a value an earlier turn ended with, which are unchanged, which values are too large
    to keep, and, when other calls to the same tool run in this step, whose value the keys
    keep."""
    return publication(writes, runtime).text


def _calls(ids: Sequence[Any]) -> str:
    """``call c2`` or ``calls c2 and c3`` (or ``c2, c3, ... + N more``)."""
    names = [str(call) for call in ids]
    if len(names) == 1:
        return f"call {names[0]}"
    if len(names) <= BREADCRUMB_KEYS:
        return f"calls {', '.join(names[:-1])} and {names[-1]}"
    return f"calls {_named(names)}"


def noted_messages(messages: Sequence[Any], stored: Sequence[Any] | None = None) -> list[Any]:
    """``messages`` as the model should see them: where calls to *different* tools wrote the
    same key in one step, each of their replies says so, and whose value state kept.

    Calls in one step run concurrently and their writes merge in call order, so the last call
    to write a key wins. Calls to the same tool say so when they publish (they know their
    siblings write the same keys); calls to different tools cannot know, since what a tool
    writes is known only once it ran. So this is worked out from the replies afterwards (each
    records the keys it wrote), and added to the model's view of them at every model call;
    the stored messages are not changed. Only steps with two or more publishing replies cost
    more than a glance. Where no reply needs a note, ``messages`` is returned as it is (a list
    of one's own where it was another sequence). ``stored``: the list in state ``messages``
    may be a copy of (see :func:`~mcp_state_versions.storage.messages.calling_several`).
    """
    notes: dict[str, str] = {}
    for index in calling_several(messages, stored):
        calls = messages[index].tool_calls  # (a list of two or more: what was looked for)
        notes.update(_contested(calls, messages[index + 1 : index + 1 + len(calls)]))
    if not notes:  # (the list itself where it is one: nothing to copy for the model)
        return messages if isinstance(messages, list) else list(messages)
    return [
        m.model_copy(update={"content": f"{m.content} {notes[m.tool_call_id]}"})
        if isinstance(m, ToolMessage) and m.tool_call_id in notes and isinstance(m.content, str)
        else m
        for m in messages
    ]


def _contested(calls: Sequence[Mapping[str, Any]], replies: Sequence[Any]) -> dict[str, str]:
    """Notes for the replies of one step whose calls, to different tools, wrote one key."""
    order = [call.get("id") for call in calls]
    names = {call.get("id"): call.get("name") for call in calls}
    writers: dict[str, list[str]] = {}
    for reply in replies:
        artifact = getattr(reply, "artifact", None)
        if not isinstance(reply, ToolMessage) or not isinstance(artifact, Mapping):
            continue
        for key in (artifact.get(PUBLISHED) or {}).get("keys", ()):
            writers.setdefault(key, []).append(reply.tool_call_id)
    notes: dict[str, list[str]] = {}
    for key, ids in writers.items():
        if len({names.get(i) for i in ids}) < 2:
            continue  # one tool's calls: their own replies said so
        ids = sorted(ids, key=lambda i: order.index(i) if i in order else len(order))
        kept = ids[-1]
        for call in ids:
            others = ", ".join(f"{names.get(i)} (call {i})" for i in ids if i != call)
            whose = "this call's" if call == kept else f"{names.get(kept)}'s (call {kept})"
            notes.setdefault(call, []).append(f"{key} also by {others}, state keeps {whose}")
    return {
        call: "(Other calls in this step wrote the same keys: "
        + "; ".join(items[:BREADCRUMB_KEYS])
        + (f"; + {len(items) - BREADCRUMB_KEYS} more" if len(items) > BREADCRUMB_KEYS else "")
        + ". The last call in order to write a key keeps it.)"
        for call, items in notes.items()
    }


def _named(keys: Sequence[str]) -> str:
    """``a, b, c`` or, past :data:`BREADCRUMB_KEYS`, ``a, ..., e + N more``."""
    shown = ", ".join(keys[:BREADCRUMB_KEYS])
    rest = len(keys) - BREADCRUMB_KEYS
    return f"{shown} + {rest} more" if rest > 0 else shown


def _entries(state: Any) -> Mapping[str, Any]:
    """``tool_state`` as it stands, for looking up the keys a publish writes (never the
    clock's: a published key has three parts), without copying every entry first."""
    tool_state = state_field(state, "tool_state")
    return tool_state if isinstance(tool_state, Mapping) else {}


def _budget(state: Any) -> int:
    record: Mapping[str, Any] = clock_of(state_field(state, "tool_state")) or {}
    budget = record.get("budget")
    return budget if isinstance(budget, int) and budget > 0 else DEFAULT_BUDGET_BYTES


def _not_kept(identities: Mapping[str, tuple[str, int]], state: Any) -> list[str]:
    """The keys the reducer will store evicted: it keeps an update's values in order while
    they fit in the budget (everything else gives way first), and no further.

    ``identities`` maps each key written to its value's ``(digest, size)``."""
    budget, held, dropped = _budget(state), 0, []
    for key, (_, size) in identities.items():
        if held + size <= budget:
            held += size
        else:
            dropped.append(key)
    return dropped


def _require_channel(state: Any) -> None:
    """A publish into a graph without the channel would be dropped by LangGraph, silently."""
    missing = (
        "tool_state" not in state
        if isinstance(state, Mapping)
        else state is not None and not hasattr(state, "tool_state")
    )
    if missing:
        raise ToolStateError(
            "this agent's state has no tool_state channel, so a publish would be dropped "
            "without a trace. With create_agent, add "
            "middleware=[mcp_state_versions.SessionStateMiddleware()]; with your own "
            "StateGraph, use mcp_state_versions.SessionState (or make_session_state) as its "
            "state schema."
        )


def _described(identities: Mapping[str, tuple[str, int]], state: Any, turn: int) -> str:
    """The keys written (with their values' ``(digest, size)``), saying which replace a value
    that an earlier turn ended with."""
    present = _entries(state)
    replaced: dict[str, int] = {}
    for key, (digest, _) in identities.items():
        entry = present.get(key)
        if not isinstance(entry, Mapping):
            continue
        since = entry.get("since")
        if isinstance(since, int) and since < turn and entry.get("digest") != digest:
            replaced[key] = since
    keys = list(identities)
    if len(replaced) == len(keys) and len(set(replaced.values())) == 1:
        since = next(iter(replaced.values()))
        what = "the value it held" if len(keys) == 1 else "each replaces the value it held"
        verb = "replaces " if len(keys) == 1 else ""
        return f"{_named(keys)} — {verb}{what} since turn {since}"
    described = [
        f"{key} (replaces the value it held since turn {replaced[key]})" if key in replaced else key
        for key in keys
    ]
    return _named(described)


def _siblings_note(runtime: ToolRuntime) -> str | None:
    """When other calls to the same tool run in this step, say whose value the keys keep."""
    me = runtime.tool_call_id
    messages = state_field(runtime.state, "messages") or []
    for message in reversed(messages):
        calls = getattr(message, "tool_calls", None) or []
        mine = next((c for c in calls if c.get("id") == me), None)
        if mine is None:
            continue
        same = [c.get("id") for c in calls if c.get("name") == mine.get("name")]
        if len(same) < 2:
            return None
        # Whether a later call succeeds is not known yet (they run concurrently), so the
        # reply says what decides it rather than guessing: a call that fails writes nothing.
        later = same[same.index(me) + 1 :]
        head = f"({len(same)} calls to {mine.get('name')} in this step write the same keys"
        if not later:
            return f"{head}; this is the last of them, so state keeps its values.)"
        return (
            f"{head}; state keeps the values of the last of them that succeeds: this call's "
            f"only if {_calls(later)} fail{'s' if len(later) == 1 else ''}.)"
        )
    return None
