"""Wording an answer for the model that will act on it.

Every answer is text. Mistakes in a call (a miscounted turn, a key that does not exist, a path
into nothing, a malformed regex) are answered with what is there and what to call instead:
an exception ends the model's line of thought, an answer lets it correct itself. Wherever the
question was about the past, an answer that cannot give the old value says so plainly and tells
the model not to use the current value in its place, because that substitution is the failure
this library exists to prevent. The same words serve the ``inspect_state`` tool and ``@state:``
handles, whichever of the ring or the history answered.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..state.reducer import is_entry
from ..walk.conversation import conversation_value, turn_conversation
from ..walk.history import (
    ConversationHistory,
    DamagedState,
    Found,
    HistoryError,
    KeyNotSetYet,
    NeverHappened,
    NoHistory,
    NotRetained,
    TurnAnswer,
    UnknownKey,
    ValueEvicted,
    turn_span,
)
from ..walk.resolve import VersionRow
from .render import PathError, compile_pattern, grep, resolve_path, shape, show

__all__ = [
    "LISTING_LINES",
    "close_keys",
    "counted",
    "current_text",
    "describe_answer",
    "describe_failure",
    "describe_versions",
    "entry_summary",
    "eviction_note",
    "eviction_status",
    "eviction_summary",
    "listing",
    "narrow",
    "read_conversation",
    "short_repr",
    "status_line",
    "unknown_key",
    "version_span",
]


def counted(count: int, noun: str) -> str:
    """``"1 version"``, ``"2 versions"``: a count with its noun in the right number."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def version_span(since: int, until: int | None) -> str:
    """``"turn 3"`` for one turn, ``"turns 3–5"`` for several, ``"turns 3–now"`` open-ended."""
    if since == until:
        return f"turn {since}"
    return f"turns {since}–{'now' if until is None else until}"


def short_repr(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text):,} characters)"


CLOSE_KEY_LENGTH = 200
"""The longest asked key compared with the keys in state (a longer one is no typo)."""


def close_keys(key: str, keys: Sequence[str]) -> list[str]:
    """Up to three keys like ``key`` (a mistyped key's likely meaning), most alike first.

    A model or an HTTP caller chooses ``key``, and state may hold thousands of long keys:
    ``difflib`` took 10 s at 5,000 keys of 167 characters, on the event loop. RapidFuzz's
    ratio (the same measure, in C, with a cutoff that skips hopeless keys early) takes
    about 3 ms there (``python -m benchmarks.close_keys``). A key's last part alone
    (``bbox`` for ``gazet/get_aoi/bbox``), which the ratio scores low, comes first.
    """
    if len(key) > CLOSE_KEY_LENGTH:
        return []
    from rapidfuzz import fuzz, process  # only a key not found needs it

    ending = [] if "/" in key else [k for k in keys if k.rsplit("/", 1)[-1] == key][:3]
    found = process.extract(key, keys, scorer=fuzz.ratio, limit=3, score_cutoff=50)
    return (ending + [match for match, _, _ in found if match not in ending])[:3]


def unknown_key(key: str, keys: Sequence[str]) -> str:
    if not keys:
        return (
            f"No key {short_repr(key)}: session state is empty. No tool has published anything yet."
        )
    close = close_keys(key, keys)
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    listed = ", ".join(sorted(keys)[:30])
    more = f" (+{len(keys) - 30} more)" if len(keys) > 30 else ""
    return (
        f"No key {short_repr(key)} in session state.{hint} Keys: {listed}{more}. "
        'key="*" lists them.'
    )


def rewrite_marker(entry: Any) -> str:
    versions = entry["versions"] if is_entry(entry) else 1
    return (
        f" — rewritten, {versions} versions" if isinstance(versions, int) and versions > 1 else ""
    )


def entry_value(entry: Any) -> tuple[bool, Any]:
    """``(present, value)``; a value stored without the reducer is shown as itself."""
    if is_entry(entry):
        return ("value" in entry, entry.get("value"))
    return True, entry


LISTING_LINES = 40
"""Lines a listing shows at most. Past it keys are grouped by tool, then by toolset, with
counts: a listing is read on every call that needs it, and at thousands of keys a line per key
would cost the model tens of thousands of tokens each time."""


def listing(tool_state: Mapping[str, Any], pattern: str | None, prefix: str = "") -> str:
    keys = sorted(key for key in tool_state if key.startswith(prefix))
    if pattern:  # the pattern is matched against the lines, so every key is described
        regex, _ = compile_pattern(pattern)
        described = ((key, _listed(key, tool_state[key])) for key in keys)
        lines = {key: line for key, line in described if regex.search(line)}
        keys = list(lines)
    if not keys:
        if not tool_state:
            return "Session state is empty."
        return "No key matches that pattern." if pattern else f"No key starts with {prefix!r}."
    if len(keys) > LISTING_LINES:  # grouped: no key's line is shown, so none is made
        return _grouped({key: tool_state[key] for key in keys}, pattern)
    if not pattern:
        lines = {key: _listed(key, tool_state[key]) for key in keys}
    text = "\n".join(lines.values())
    if any(rewrite_marker(tool_state[key]) for key in keys):
        text += (
            "\n(A rewritten key held other values in earlier turns: read one with turn=N, "
            "or all of them with versions=true.)"
        )
    return text


def _listed(key: str, entry: Any) -> str:
    present, value = entry_value(entry)
    described = shape(value) if present else f"({eviction_summary(entry)})"
    return f"{key}: {described}{rewrite_marker(entry)}"


def _groups(entries: Mapping[str, Any], depth: int) -> dict[str, list[Any]]:
    groups: dict[str, list[Any]] = {}
    for key, entry in entries.items():
        groups.setdefault("/".join(key.split("/")[:depth]) + "/", []).append(entry)
    return groups


def _grouped(entries: Mapping[str, Any], pattern: str | None) -> str:
    """Too many keys for a line each: a line per tool (``<toolset>/<tool>/``), or per toolset
    when even those are too many (unless there is one toolset), each with its counts, and how
    to list one group."""
    by_tool, by_toolset = _groups(entries, 2), _groups(entries, 1)
    groups = by_tool if len(by_tool) <= LISTING_LINES or len(by_toolset) == 1 else by_toolset
    lines = []
    for group, members in list(groups.items())[:LISTING_LINES]:
        rewritten = sum(1 for entry in members if rewrite_marker(entry))
        note = f", {rewritten} rewritten" if rewritten else ""
        lines.append(f"{group}*: {len(members)} keys{note}")
    if len(groups) > LISTING_LINES:
        lines.append(f"+ {len(groups) - LISTING_LINES} more groups")
    narrowed = f" matching {short_repr(pattern)}" if pattern else ""
    example = next(iter(groups))
    return (
        f"{len(entries)} keys{narrowed}, too many to list one by one; by group:\n"
        + "\n".join(lines)
        + f'\n(List one group with key="{example}*"; pattern= narrows any listing.)'
    )


def narrow(value: Any, *, path: str | None, pattern: str | None) -> str:
    if path is not None:
        value = resolve_path(value, path)
    if pattern is None:
        return show(value)
    lines, literal = grep(value, pattern)
    note = " (not a valid regular expression, so it was matched as plain text)" if literal else ""
    if not lines:
        return f"No line matches {short_repr(pattern)}{note}."
    prefix = f"Pattern {short_repr(pattern)} was matched as plain text: it is not a valid regex.\n"
    return (prefix if literal else "") + "\n".join(lines)


def _rewrite_note(key: str, entry: Any, now: int) -> str:
    if not rewrite_marker(entry):
        return ""
    versions, since = entry["versions"], entry.get("since")
    held = f"set after turn {now} ended" if since > now else f"the one since turn {since}"
    return (
        f"\n(Note: {key} has held {versions} values; this is {held}. For an earlier one call "
        f"inspect_state(key={key!r}, turn=N), or versions=true to see them all.)"
    )


def evicted_turn_readable(entry: Mapping[str, Any]) -> int | None:
    """The turn whose end still held an evicted current value, or ``None`` when none did
    (it was evicted in the same turn it was written, or on arrival)."""
    evicted, turn = entry.get("evicted"), entry.get("turn")
    if isinstance(evicted, int) and isinstance(turn, int) and evicted > turn:
        return turn
    return None


def eviction_summary(entry: Mapping[str, Any]) -> str:
    """A listing's note for an entry whose current value the size budget evicted."""
    readable = evicted_turn_readable(entry)
    if readable is None and entry.get("displaced"):
        return "evicted to make room for later writes in the turn it was written; not stored"
    if readable is None:
        return "too large to keep: its value was never stored"
    return f"value evicted for size; read it with turn={readable}"


def eviction_note(key: str, entry: Mapping[str, Any], *, flag: str = "turn=") -> str:
    """What to tell a reader of an evicted current value: the one read that can work, if any.

    ``flag`` is how that reader names a turn (``turn=`` for a model, ``--turn`` for the
    command line, ``?turn=`` over HTTP).
    """
    readable = evicted_turn_readable(entry)
    if readable is None and entry.get("displaced"):
        return (
            f"{key}'s value was evicted from session state in turn {entry['evicted']}, the turn "
            "it was written, to make room for values written after it within the size budget. "
            "No turn ended holding it, so it was never stored and no read can return it. Run "
            "the tool that produced it again if you need it."
        )
    if readable is None:
        return (
            f"{key}'s value was too large to keep within session state's size budget, and no "
            "turn ended holding it, so it was never stored and no read can return it. Run the "
            "tool that produced it again if you need it."
        )
    return (
        f"{key}'s current value was evicted from session state in turn {entry['evicted']} to "
        f"keep it within its size budget. The conversation's history holds it as turn "
        f"{readable} ended: read it with {flag}{readable}."
    )


def current_text(key: str, entry: Any, *, path: str | None, pattern: str | None, now: int) -> str:
    present, value = entry_value(entry)
    if not present:
        return eviction_note(key, entry)
    return narrow(value, path=path, pattern=pattern) + _rewrite_note(key, entry, now)


def span_text(since: int | None, until: int | None, now: int | None = None) -> str:
    """How a version's turns read: ``turn 3``, ``turns 1–2``, ``turn 4 on``.

    ``now`` is the thread's current turn: a current version set after it ended (an edit made
    between turns) is said to be so, since no turn has ended holding it yet.
    """
    if since is None:
        return "an earlier turn"
    if until is None and now is not None and since > now:
        return f"set after turn {now} ended"
    if until is None:
        return f"turn {since} on"
    return f"turn {since}" if since == until else f"turns {since}–{until}"


def describe_answer(
    answer: TurnAnswer,
    *,
    keys: Sequence[str] = (),
    path: str | None = None,
    pattern: str | None = None,
) -> str:
    """The model-facing text of a :data:`~mcp_state_versions.walk.history.TurnAnswer`."""
    match answer:
        case Found(key=key, turn=turn, value=value, since=since, until=until, current=current):
            body = narrow(value, path=path, pattern=pattern)
            if answer.dropped:
                return (
                    f"{key} at the end of turn {turn}. An edit later dropped the key from "
                    f"state, so it holds no value now; this is the value then.\n{body}"
                )
            if current:
                return (
                    f"{key} at the end of turn {turn} (held {span_text(since, None)}). "
                    f"It is still the current value.\n{body}"
                )
            held = (
                "the value then"
                if since is None
                else f"held {span_text(since, until)}"
                if until is not None
                else f"held from turn {since}"
            )
            return (
                f"{key} at the end of turn {turn} ({held}). A later turn replaced it; the "
                f"current value differs.\n{body}"
            )
        case NeverHappened(turn=turn, total=total):
            if total == 0:
                return f"Turn {turn} never happened: this thread has no turns yet."
            return (
                f"Turn {turn} never happened: this thread has had {total} turn"
                f"{'s' if total != 1 else ''} (turn 1 is the first user message, turn {total} "
                f"the latest). Call again with a turn from 1 to {total}."
            )
        case NotRetained(key=key, turn=turn, retained=retained):
            return (
                f"Turn {turn} is no longer retained: this deployment pruned that part of the "
                f"conversation's history. {key} had a value then, and it cannot be read any "
                f"more. Retained turns: {turn_span(retained)}. Do not use the current value "
                "in its place; say that the earlier value is no longer available."
            )
        case KeyNotSetYet(key=key, turn=turn, first_turn=first):
            when = f" It was first set in turn {first}." if first is not None else ""
            return f"{key} was not set yet at the end of turn {turn}: it had no value then.{when}"
        case NoHistory(key=key, turn=turn, oldest_in_ring=oldest):
            return (
                f"{key}'s value at the end of turn {turn} is not available: this deployment "
                f"keeps no turn history, and the versions kept with the key reach back only to "
                f"turn {oldest}. Do not use the current value in its place; say that the "
                "earlier value is not available."
            )
        case ValueEvicted(key=key, turn=turn):
            return (
                f"{key} had a value at the end of turn {turn}, but it was too large to keep "
                "within session state's size budget, so no record of it was ever stored "
                "(nothing was pruned). Do not use the current value in its place; say that "
                "the earlier value is not available."
            )
        case UnknownKey(key=key):
            return unknown_key(key, keys)
    raise AssertionError(f"unhandled answer {answer!r}")  # pragma: no cover


def describe_versions(
    key: str,
    total: int,
    rows: Sequence[VersionRow],
    *,
    path: str | None,
    pattern: str | None,
    now: int,
) -> str:
    """Every version of ``key`` (:func:`~mcp_state_versions.walk.resolve.resolve_versions`), one
    line each, oldest first; a version no reader can have says why."""
    lines = [f"{key} has held {total} value{'s' if total != 1 else ''}, oldest first:"]
    for row in rows:
        if row.since is None:  # versions whose own turns are not known
            many = f"{row.count} version{'s' if row.count != 1 else ''}"
            held = f"{many} held before turn {row.until + 1}" if row.until else many
        else:
            held = span_text(row.since, row.until, now)
            if row.current:
                held += " (current)"
            if row.writes > 1:
                held += f", written {row.writes} times in turn {row.since}"
        if row.status == "kept":
            try:
                body = narrow(row.value, path=path, pattern=pattern)
            except PathError as error:
                body = f"({error})"
        elif row.status == "evicted":
            body = (
                "(too large to keep within session state's size budget: it was never stored, "
                "so it cannot be read)"
            )
        elif row.status == "pruned":
            body = "(those turns were pruned from this deployment's history: it cannot be read)"
        elif row.status == "unlisted":
            body = f"(older, not listed here: read one with turn=, e.g. turn={row.until})"
        else:
            body = (
                "(not kept with the key, and this deployment keeps no turn history: it cannot "
                "be read)"
            )
        lines.append(f"- {held}: {body}")
    return "\n".join(lines)


def describe_failure(error: HistoryError) -> str:
    """What the model is told when the history could not be read: why, and what to do."""
    if isinstance(error, DamagedState):
        where = "its current state" if error.turn is None else f"turn {error.turn}"
        return (
            f"The saved history of this conversation is damaged at {where} and cannot be read "
            f"({error.detail}). Do not guess or use another turn's value in its place; tell "
            "the user that this part of the history cannot be read. Other turns may still read."
        )
    return (
        "The conversation's history store is not answering right now, so that turn cannot be "
        "read. Do not use the current value in its place; try the read again later, or tell "
        "the user the earlier value is not available at the moment."
    )


def entry_summary(entry: Mapping[str, Any]) -> dict[str, Any]:
    """One key's row in a listing for people (the HTTP API and the command line)."""
    evicted = "value" not in entry
    return {
        "shape": "(evicted)" if evicted else shape(entry["value"]),
        "tool": entry.get("tool"),
        "turn": entry["turn"],
        "since": entry["since"],
        "versions": entry["versions"],
        "evicted": evicted,
    }


# ---------------------------------------------------------------------------------------------
# For people: the command line and the HTTP API


def status_line(answer: TurnAnswer, *, keys: Sequence[str] = ()) -> str:
    """One line for an operator or a script's log: what the read found, in the thread's terms.

    A model is told what to do next ("do not use the current value in its place"); a person
    reading a thread is told only what is so, and which flag or parameter to change.
    """
    match answer:
        case Found(key=key, turn=turn, since=since, until=until, current=current):
            held = "" if since is None else f", held {span_text(since, None if current else until)}"
            return f"{key} at the end of turn {turn}{held}"
        case NeverHappened(turn=turn, total=total):
            if total == 0:
                return f"turn {turn} never happened: the thread has no turns yet"
            return f"turn {turn} never happened: the thread has had {total} (1–{total})"
        case NotRetained(key=key, turn=turn, retained=retained):
            return (
                f"turn {turn} is no longer retained (pruned), so {key} cannot be read then; "
                f"retained turns: {turn_span(retained)}"
            )
        case KeyNotSetYet(key=key, turn=turn, first_turn=first):
            when = f"; first set in turn {first}" if first is not None else ""
            return f"{key} was not set yet at the end of turn {turn}{when}"
        case NoHistory(key=key, turn=turn, oldest_in_ring=oldest):
            return (
                f"{key} at turn {turn} is older than the versions kept with the key (from turn "
                f"{oldest}), and this store keeps no turn history"
            )
        case ValueEvicted(key=key, turn=turn):
            return (
                f"{key} at turn {turn} was too large for session state's size budget and was "
                "never stored"
            )
        case UnknownKey(key=key):
            close = close_keys(key, keys)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            return f"no key {key!r} in this thread ({len(keys)} keys){hint}"
    raise AssertionError(f"unhandled answer {answer!r}")  # pragma: no cover


def eviction_status(key: str, entry: Mapping[str, Any], *, flag: str) -> str:
    """For people: why an evicted current value cannot be shown, and the read that can."""
    readable = evicted_turn_readable(entry)
    if readable is None:
        return (
            f"{key}'s value was evicted for size in turn {entry.get('evicted')} and no turn "
            "ended holding it: it was never stored"
        )
    return (
        f"{key}'s current value was evicted for size in turn {entry['evicted']}; history "
        f"holds it as turn {readable} ended: {flag}{readable}"
    )


async def read_conversation(
    history: ConversationHistory | None,
    thread_id: str | None,
    turns: range,
    *,
    path: str | None = None,
    pattern: str | None = None,
) -> str:
    """What ``inspect_state(key="@conversation", turn=...)`` tells the model: each turn's
    conversation verbatim, read from history (so a turn a summary took out of the messages
    in state still reads as it was said), or why it cannot be read."""
    if history is None or thread_id is None:
        return (
            "What was said in earlier turns is not available: this deployment keeps no turn "
            "history. Say so rather than guessing what was said."
        )
    parts = []
    for turn in turns:
        found = await history.turn_messages(thread_id, turn)
        index = found.index
        if turn > index.total:
            parts.append(
                f"Turn {turn} never happened: this thread has had {index.total} turn"
                f"{'s' if index.total != 1 else ''}. Call again with a turn from 1 to "
                f"{index.total}."
            )
            continue
        if found.messages is None:
            parts.append(
                f"Turn {turn} is no longer retained: this deployment pruned that part of the "
                f"conversation's history (retained turns: {turn_span(index.retained)}). "
                "Say that what was said then is no longer available."
            )
            continue
        said = turn_conversation(found.messages, found.record)
        value = conversation_value(said, turn, cut=path is None)
        heading = f"Turn {turn}'s conversation, as it was said"
        if value.get("open"):
            heading += " (the turn has not ended: a call waits for a person)"
        parts.append(f"{heading}:\n{narrow(value, path=path, pattern=pattern)}")
    return "\n\n".join(parts)
