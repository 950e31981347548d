"""``inspect_state``: the model's window onto session state, present and past.

Two readers live here. :func:`read_state_key` is synchronous and reads the present only; it is
what a host calls directly. :func:`make_inspect_state` builds the asynchronous LangChain tool
the model calls, which also reads the past (``turn=``, ``versions=``) through
:func:`mcp_state_versions.history.resolve_turn`.

Every answer is text addressed to a model that will act on it. Mistakes in a call (a miscounted
turn, a key that does not exist, a path into nothing, a malformed regex) come back as answers
that say what is there and what to call instead, never as exceptions: an exception ends the
model's line of thought, an answer lets it correct itself. Wherever the question was about the
past, an answer that cannot give the old value says so plainly and tells the model not to use
the current value in its place, because that substitution is the failure this library exists
to prevent.
"""

# No ``from __future__ import annotations``: this module defines LangChain tools, whose
# annotations LangChain would re-evaluate from strings on every call.

import asyncio
import difflib
import fnmatch
import re
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from typing import Annotated, Any

from langchain_core.tools import BaseTool, tool
from langgraph.prebuilt import ToolRuntime
from pydantic import BaseModel, Field, WithJsonSchema

from .backends import NeedsAsync, run_sync
from .clock import current_turn, entries_of, state_field
from .history import (
    AUTO,
    DamagedState,
    Found,
    HistoryError,
    HistoryOption,
    KeyNotSetYet,
    NeverHappened,
    NoHistory,
    NotRetained,
    ThreadHistory,
    TurnAnswer,
    UnknownKey,
    ValueEvicted,
    resolve_turn,
    turn_span,
)
from .render import PathError, PatternError, compile_pattern, grep, resolve_path, shape, show
from .state import StateEntry, is_entry
from .versions import version_spans

__all__ = [
    "INSPECT_STATE_DESCRIPTION",
    "LISTING_LINES",
    "describe_answer",
    "entry_summary",
    "eviction_note",
    "make_inspect_state",
    "read_state_key",
    "versioned_entries",
    "visible_keys",
]

_REFERENCE_PREFIX = "@state:"

INSPECT_STATE_DESCRIPTION = """\
Read session state: the values your tools published, by key, <toolset>/<tool>/<field>.
- key="*" lists every key with a one-line shape; key="<toolset>/<tool>/*" lists one \
group (a listing of many keys shows groups first). A key marked "rewritten, N versions" has \
held other values in earlier turns; its current value is only the latest.
- key=<key> returns the current value. path= reads part of it (e.g. features[0].name); \
pattern= returns only the matching "path = value" lines.
- turn=N returns the value as it stood at the end of turn N (turns count the user's \
messages, from 1). Use it whenever you compare with an earlier result: a later call may have \
replaced it.
- versions=true lists every value the key has held, with its turns, in one call."""


# ---------------------------------------------------------------------------------------------
# Arguments


class _BadCall(ValueError):
    """A call the model should correct; the message is the answer it gets."""


def _parse_key(key: Any) -> str:
    if not isinstance(key, str) or not key.strip():
        raise _BadCall(
            f'key must be a state key, "<toolset>/<tool>/<field>", or "*" to list them; '
            f"got {_short_repr(key)}."
        )
    key = key.strip()
    if key.startswith(_REFERENCE_PREFIX):
        key = key[len(_REFERENCE_PREFIX) :].strip()
    return key


_TURN_TEXT = re.compile(r"\s*([+-]?)([0-9]{1,12})\s*", re.ASCII)


def _parse_turn(turn: Any) -> int | None:
    """A turn number from whatever a model sends: ``3``, ``3.0``, ``"3"``, ``" +3 "``.

    Only ASCII digits count (``"²"`` and other Unicode digits are refused, not converted),
    and at most twelve of them; a number past any thread's length is simply a turn that never
    happened. Nothing here can raise anything but the correction the model gets.
    """
    if turn is None or turn == "":
        return None
    value: int | None = None
    if isinstance(turn, bool):
        value = None
    elif isinstance(turn, int):
        value = turn
    elif isinstance(turn, float) and turn.is_integer() and abs(turn) < 1e15:
        value = int(turn)
    elif isinstance(turn, str) and (match := _TURN_TEXT.fullmatch(turn)):
        value = int(match.group(2)) * (-1 if match.group(1) == "-" else 1)
    if value is None:
        raise _BadCall(
            f"turn must be a whole number of a turn (1 for the first user message), got "
            f"{_short_repr(turn)}. Omit turn to read the current value."
        )
    if value < 1:
        raise _BadCall(
            f"turn must be 1 or more (turn 1 is the first user message), got {value}. "
            "Omit turn to read the current value."
        )
    return value


def _short_repr(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text):,} characters)"


MAX_ARGUMENT_CHARS = 2000
"""The longest ``pattern=`` or ``path=`` the tool takes. A pattern names what to find; one of
hundreds of kilobytes is a value pasted by mistake, and past about 700 KB RE2 cannot even
compile it."""


def _parse_text(name: str, text: Any) -> str | None:
    if text is None or text == "":
        return None
    if not isinstance(text, str):
        raise _BadCall(f"{name} must be text, got {_short_repr(text)}.")
    if len(text) > MAX_ARGUMENT_CHARS:
        raise _BadCall(
            f"{name} is {len(text):,} characters long; keep it under {MAX_ARGUMENT_CHARS:,}. "
            f"It names what to find ({name}={_short_repr(text, 40)}), not the text itself."
        )
    return text


def _parse_flag(name: str, flag: Any) -> bool:
    if flag in (None, False, "false", "False", 0, ""):
        return False
    if flag in (True, "true", "True", 1):
        return True
    raise _BadCall(f"{name} must be true or false, got {_short_repr(flag)}.")


# ---------------------------------------------------------------------------------------------
# Reading the present


def _readable(tool_state: Any) -> Mapping[str, Any]:
    """The published keys of ``tool_state`` (the clock record is not one)."""
    if tool_state is None:
        return {}
    if not isinstance(tool_state, Mapping):
        raise _BadCall(
            "Session state cannot be read: tool_state holds "
            f"{type(tool_state).__name__}, not a set of keys. This is a fault in the host "
            "application, not in your call; tell the user state is unavailable."
        )
    return entries_of(tool_state)


def visible_keys(
    tool_state: Mapping[str, Any], allowed_keys: Sequence[str] | None
) -> dict[str, Any]:
    """The published keys of ``tool_state`` that match ``allowed_keys`` (globs; ``None``: all)."""
    published = entries_of(tool_state)
    if allowed_keys is None:
        return published
    return {
        key: entry
        for key, entry in published.items()
        if any(fnmatch.fnmatchcase(key, pattern) for pattern in allowed_keys)
    }


def _unknown_key(key: str, keys: Sequence[str]) -> str:
    if not keys:
        return (
            f"No key {_short_repr(key)}: session state is empty. No tool has published "
            "anything yet."
        )
    close = difflib.get_close_matches(key, keys, n=3, cutoff=0.5) if len(key) <= 200 else []
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    listed = ", ".join(sorted(keys)[:30])
    more = f" (+{len(keys) - 30} more)" if len(keys) > 30 else ""
    return (
        f"No key {_short_repr(key)} in session state.{hint} Keys: {listed}{more}. "
        'key="*" lists them.'
    )


def _marker(entry: Any) -> str:
    versions = entry["versions"] if is_entry(entry) else 1
    return (
        f" — rewritten, {versions} versions" if isinstance(versions, int) and versions > 1 else ""
    )


def _entry_value(entry: Any) -> tuple[bool, Any]:
    """``(present, value)``; a value stored without the reducer is shown as itself."""
    if is_entry(entry):
        return ("value" in entry, entry.get("value"))
    return True, entry


LISTING_LINES = 40
"""Lines a listing shows at most. Past it keys are grouped by tool, then by toolset, with
counts: a listing is read on every call that needs it, and at thousands of keys a line per key
would cost the model tens of thousands of tokens each time."""


def _listing(tool_state: Mapping[str, Any], pattern: str | None, prefix: str = "") -> str:
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
    if any(_marker(tool_state[key]) for key in keys):
        text += (
            "\n(A rewritten key held other values in earlier turns: read one with turn=N, "
            "or all of them with versions=true.)"
        )
    return text


def _listed(key: str, entry: Any) -> str:
    present, value = _entry_value(entry)
    described = shape(value) if present else f"({eviction_summary(entry)})"
    return f"{key}: {described}{_marker(entry)}"


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
        rewritten = sum(1 for entry in members if _marker(entry))
        note = f", {rewritten} rewritten" if rewritten else ""
        lines.append(f"{group}*: {len(members)} keys{note}")
    if len(groups) > LISTING_LINES:
        lines.append(f"+ {len(groups) - LISTING_LINES} more groups")
    narrowed = f" matching {_short_repr(pattern)}" if pattern else ""
    example = next(iter(groups))
    return (
        f"{len(entries)} keys{narrowed}, too many to list one by one; by group:\n"
        + "\n".join(lines)
        + f'\n(List one group with key="{example}*"; pattern= narrows any listing.)'
    )


def _narrow(value: Any, *, path: str | None, pattern: str | None) -> str:
    if path is not None:
        value = resolve_path(value, path)
    if pattern is None:
        return show(value)
    lines, literal = grep(value, pattern)
    note = " (not a valid regular expression, so it was matched as plain text)" if literal else ""
    if not lines:
        return f"No line matches {_short_repr(pattern)}{note}."
    prefix = f"Pattern {_short_repr(pattern)} was matched as plain text: it is not a valid regex.\n"
    return (prefix if literal else "") + "\n".join(lines)


def _rewrite_note(key: str, entry: Any, now: int) -> str:
    if not _marker(entry):
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


def _current(key: str, entry: Any, *, path: str | None, pattern: str | None, now: int) -> str:
    present, value = _entry_value(entry)
    if not present:
        return eviction_note(key, entry)
    return _narrow(value, path=path, pattern=pattern) + _rewrite_note(key, entry, now)


def read_state_key(
    key: str,
    state: Any,
    *,
    pattern: str | None = None,
    path: str | None = None,
    allowed_keys: Sequence[str] | None = None,
) -> str:
    """Read ``key`` from graph ``state`` as the model would see it, at present.

    ``key="*"`` lists keys with shapes and rewrite markers (``key="<prefix>*"``: those that
    start with the prefix; past :data:`LISTING_LINES` keys, groups). ``path`` drills into the value,
    ``pattern`` greps its flattened lines, ``allowed_keys`` (glob patterns) limits what is
    visible. Always returns text; a bad call returns the text that explains it.
    """
    try:
        key = _parse_key(key)
        pattern = _parse_text("pattern", pattern)
        path = _parse_text("path", path)
        tool_state = visible_keys(_readable(state_field(state, "tool_state")), allowed_keys)
        if key.endswith("*") and key not in tool_state:
            return _listing(tool_state, pattern, prefix=key[:-1])
        if key not in tool_state:
            return _unknown_key(key, list(tool_state))
        return _current(key, tool_state[key], path=path, pattern=pattern, now=current_turn(state))
    except (_BadCall, PathError, PatternError) as error:
        return str(error)


# ---------------------------------------------------------------------------------------------
# Reading the past


def _span(since: int | None, until: int | None, now: int | None = None) -> str:
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
    """The model-facing text of a :data:`~mcp_state_versions.history.TurnAnswer`."""
    match answer:
        case Found(key=key, turn=turn, value=value, since=since, until=until, current=current):
            body = _narrow(value, path=path, pattern=pattern)
            if current:
                return (
                    f"{key} at the end of turn {turn} (held {_span(since, None)}). "
                    f"It is still the current value.\n{body}"
                )
            held = (
                "the value then"
                if since is None
                else f"held {_span(since, until)}"
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
            return _unknown_key(key, keys)
    raise AssertionError(f"unhandled answer {answer!r}")  # pragma: no cover


def _versions(
    key: str,
    entry: Mapping[str, Any],
    *,
    path: str | None,
    pattern: str | None,
    now: int,
    retained: range | None = None,
) -> str:
    """Every version the entry knows of. ``retained`` (the turns history still holds, when
    known) decides which ``turn=N`` reads can still work: a version whose turns were all
    pruned is said to be gone rather than pointed at."""
    spans = version_spans(entry)  # type: ignore[arg-type]
    total = entry["versions"]
    older = total - len(spans)
    first = retained.start if retained is not None else 1
    lines = [f"{key} has held {total} value{'s' if total != 1 else ''}, oldest first:"]
    if older > 0:
        before = spans[0].since
        what = f"- {older} older version{'s' if older != 1 else ''} before turn {before}, "
        if before - 1 < first:
            lines.append(
                what + f"not kept with the key, and turns before {first} are no longer "
                "retained: they cannot be read."
            )
        else:
            turns = turn_span(range(first, before))
            lines.append(what + f"not kept with the key: read one with turn=N ({turns}).")
    for span in spans:
        label = f"{_span(span.since, span.until, now)}{' (current)' if span.current else ''}"
        if span.writes > 1:
            label += f", written {span.writes} times in turn {span.since}"
        if span.kept:
            try:
                body = _narrow(span.value, path=path, pattern=pattern)
            except PathError as error:
                body = f"({error})"
            lines.append(f"- {label}: {body}")
        else:
            last = span.until if span.until is not None else now
            if last < first:
                lines.append(f"- {label}: (not kept with the key, and those turns were pruned)")
            else:
                turn = max(span.since, first)
                lines.append(f"- {label}: (not kept with the key; read it with turn={turn})")
    return "\n".join(lines)


class _InspectStateArgs(BaseModel):
    """The arguments the model gives ``inspect_state``, as its schema shows them.

    Declared apart from the function so that the injected ``runtime`` is not part of it:
    LangChain validates and then dumps every field of a tool's argument schema on each call,
    and a ``runtime`` field would have it walk the whole graph state, session state included,
    every time the model reads a key. ``runtime`` is injected from the function's signature
    either way. Every field is typed ``Any`` so that a malformed value reaches the tool, which
    answers it in words (see :func:`_parse_turn`), instead of failing validation.
    """

    key: Annotated[
        Any,
        WithJsonSchema({"type": "string"}),
        Field(description='A state key, "<toolset>/<tool>/<field>", or "*" to list keys.'),
    ]
    pattern: Annotated[
        Any,
        WithJsonSchema({"type": "string"}),
        Field(description="Regular expression; only matching 'path = value' lines return."),
    ] = None
    path: Annotated[
        Any,
        WithJsonSchema({"type": "string"}),
        Field(description="Part of the value to read, e.g. features[0].name."),
    ] = None
    turn: Annotated[
        Any,
        WithJsonSchema({"type": "integer", "minimum": 1}),
        Field(description="Read the value as it stood at the end of this turn (1 = first)."),
    ] = None
    versions: Annotated[
        Any,
        WithJsonSchema({"type": "boolean"}),
        Field(description="List every value the key has held, with its turns."),
    ] = False


def make_inspect_state(
    allowed_keys: Sequence[str] | None = None,
    history: HistoryOption = AUTO,
) -> BaseTool:
    """Build the async ``inspect_state`` tool.

    ``allowed_keys`` (glob patterns) limits which keys the model may read; ``None`` allows all.
    ``history`` answers ``turn=`` reads older than an entry's ring: :data:`AUTO` (the default)
    walks the checkpointer of the run the tool is executing in, a
    :class:`~mcp_state_versions.history.ThreadHistory` is used as given, and ``None`` reads the
    rings only; without history such reads say this deployment keeps no turn history. The
    thread is the one in the tool call's config (``configurable.thread_id``).
    """

    @tool("inspect_state", description=INSPECT_STATE_DESCRIPTION, args_schema=_InspectStateArgs)
    async def inspect_state(
        key: Any,
        runtime: ToolRuntime,
        pattern: Any = None,
        path: Any = None,
        turn: Any = None,
        versions: Any = False,
    ) -> str:
        return await reads(runtime, key, pattern, path, turn, versions, sync=False)

    def reads(runtime: ToolRuntime, *args: Any, sync: bool) -> Coroutine[Any, Any, str]:
        return _inspect(
            runtime,
            *args,
            allowed_keys=allowed_keys,
            history=_history_of_run(history, runtime, sync=sync),
            offload=None if sync else _in_thread,
        )

    def inspect_state_sync(
        key: Any,
        runtime: ToolRuntime,
        pattern: Any = None,
        path: Any = None,
        turn: Any = None,
        versions: Any = False,
    ) -> str:
        # A graph run with invoke() calls tools synchronously. The same coroutine runs here
        # over the savers' synchronous API, where it never suspends (backends.run_sync); a
        # history that can only be read asynchronously is said to be so, never awaited.
        try:
            return run_sync(reads(runtime, key, pattern, path, turn, versions, sync=True))
        except NeedsAsync:
            return (
                "That turn is older than the versions kept with the key, and reading it needs "
                "the conversation's checkpoint history, which this deployment's checkpointer "
                "only offers to asynchronous runs (ainvoke/astream). Do not use the current "
                "value in its place; say the earlier value is not available here."
            )

    inspect_state.func = inspect_state_sync  # type: ignore[attr-defined]
    return inspect_state


def _history_of_run(
    history: HistoryOption, runtime: ToolRuntime, *, sync: bool
) -> ThreadHistory | None:
    """``AUTO``: the history of the checkpointer this run uses, looked up now."""
    if history != AUTO:
        return history  # type: ignore[return-value]
    from .checkpoint_walk import history_for_run

    return history_for_run(runtime.config, sync=sync)


async def _inspect(
    runtime: ToolRuntime,
    key: Any,
    pattern: Any,
    path: Any,
    turn: Any,
    versions: Any,
    *,
    allowed_keys: Sequence[str] | None,
    history: ThreadHistory | None,
    offload: Callable[..., Awaitable[str]] | None = None,
) -> str:
    """The body of ``inspect_state``, shared by its async and sync forms.

    ``offload`` runs the text-producing step when a ``pattern`` is given: in a worker thread
    for the async tool, so a long search over a large value never holds up the event loop
    (and every other thread the process is serving); inline for the sync one.
    """
    try:
        key_ = _parse_key(key)
        turn_ = _parse_turn(turn)
        pattern_ = _parse_text("pattern", pattern)
        path_ = _parse_text("path", path)
        all_versions = _parse_flag("versions", versions)
        run = offload if pattern_ is not None and offload is not None else _inline
        if turn_ is None and not all_versions:
            return await run(
                read_state_key,
                key_,
                runtime.state,
                pattern=pattern_,
                path=path_,
                allowed_keys=allowed_keys,
            )
        tool_state = visible_keys(_readable(state_field(runtime.state, "tool_state")), allowed_keys)
        if key_.endswith("*") and key_ not in tool_state:
            return (
                'turn= and versions= read one key; call key="*" without them to list keys, '
                "then read the key you need."
            )
        if key_ not in tool_state:
            return _unknown_key(key_, list(tool_state))
        entries = versioned_entries(tool_state)
        if key_ not in entries:
            return (
                f"{key_} carries no version record (it was stored without this library's "
                "reducer), so only its current value can be read: call without turn= or "
                "versions=."
            )
        if all_versions and turn_ is None:
            thread_id = _thread_id(runtime)
            retained = None
            if history is not None and thread_id is not None:
                retained = (await history.turns(thread_id)).retained
            return await run(
                _versions,
                key_,
                tool_state[key_],
                path=path_,
                pattern=pattern_,
                now=current_turn(runtime.state),
                retained=retained,
            )
        assert turn_ is not None
        answer = await resolve_turn(
            entries,
            key_,
            turn_,
            current_turn=current_turn(runtime.state),
            history=history,
            thread_id=_thread_id(runtime),
        )
        return await run(
            describe_answer, answer, keys=list(tool_state), path=path_, pattern=pattern_
        )
    except (_BadCall, PathError, PatternError) as error:
        return str(error)
    except HistoryError as error:
        return describe_failure(error)


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


async def _inline(function: Callable[..., str], *args: Any, **kwargs: Any) -> str:
    return function(*args, **kwargs)


async def _in_thread(function: Callable[..., str], *args: Any, **kwargs: Any) -> str:
    return await asyncio.to_thread(function, *args, **kwargs)


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


def versioned_entries(tool_state: Mapping[str, Any]) -> Mapping[str, StateEntry]:
    """Only true entries can answer for the past; a raw value is treated as unversioned."""
    return {key: entry for key, entry in entries_of(tool_state).items() if is_entry(entry)}


def _thread_id(runtime: ToolRuntime) -> str | None:
    configurable = (runtime.config or {}).get("configurable") or {}
    thread_id = configurable.get("thread_id")
    return None if thread_id is None else str(thread_id)
