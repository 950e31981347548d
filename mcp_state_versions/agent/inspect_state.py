"""``inspect_state``: the model's window onto session state, present and past.

Two readers live here. :func:`read_state_key` is synchronous and reads the present only; it is
what a host calls directly. :func:`make_inspect_state` builds the asynchronous LangChain tool
the model calls, which also reads the past (``turn=``, ``versions=``) through
:mod:`mcp_state_versions.walk.resolve`. What the model is told is worded in
:mod:`mcp_state_versions.wording.answers`; this module takes the model's arguments, whatever their
shape, and answers a malformed one with the correction, never an exception.
"""

# No ``from __future__ import annotations``: this module defines LangChain tools, whose
# annotations LangChain would re-evaluate from strings on every call.

import asyncio
import re
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from typing import Annotated, Any

from langchain_core.tools import BaseTool, tool
from langgraph.prebuilt import ToolRuntime
from pydantic import BaseModel, Field, WithJsonSchema

from ..backends import NeedsAsync, run_sync
from ..state.clock import clock_of, current_turn, entries_of, keys_dropped, state_field
from ..walk.conversation import (
    CONVERSATION_KEY,
    TurnsError,
    parse_turns,
    removed_turns_note,
)
from ..walk.history import (
    AUTO,
    ConversationHistory,
    HistoryError,
    HistoryOption,
    ThreadHistory,
    UnknownKey,
)
from ..walk.resolve import (
    history_of_run,
    resolve_turn,
    resolve_versions,
    thread_of,
    versioned_entries,
    visible_keys,
)
from ..wording.answers import (
    current_text,
    describe_answer,
    describe_failure,
    describe_versions,
    listing,
    read_conversation,
    short_repr,
    unknown_key,
)
from ..wording.render import PathError, PatternError
from .handles import HANDLE_PREFIX

__all__ = [
    "INSPECT_STATE_DESCRIPTION",
    "MAX_ARGUMENT_CHARS",
    "make_inspect_state",
    "read_state_key",
]


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
- versions=true lists the values the key has held, with their turns, in one call (the \
newest 20; turn= reads any older one).
To pass a value to another tool without copying it, give the argument as a handle: \
"@state:<key>" (the current value) or "@state:<key>@turn=N" (the value at the end of turn N). \
The tool receives the value itself, and its reply ends with [state used: <key>@turn=N]."""


class _BadCall(ValueError):
    """A call the model should correct; the message is the answer it gets."""


def _parse_key(key: Any) -> str:
    if not isinstance(key, str) or not key.strip():
        raise _BadCall(
            f'key must be a state key, "<toolset>/<tool>/<field>", or "*" to list them; '
            f"got {short_repr(key)}."
        )
    key = key.strip()
    if key.startswith(HANDLE_PREFIX):
        key = key[len(HANDLE_PREFIX) :].strip()
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
            f"{short_repr(turn)}. Omit turn to read the current value."
        )
    if value < 1:
        raise _BadCall(
            f"turn must be 1 or more (turn 1 is the first user message), got {value}. "
            "Omit turn to read the current value."
        )
    return value


MODEL_VERSIONS_LIMIT = 20
"""The most versions ``versions=true`` lists, newest first: a key rewritten every turn of a
long thread has thousands, each beyond the ring a history read; older ones are named by turn,
and ``turn=`` reads any of them."""

MAX_ARGUMENT_CHARS = 2000
"""The longest ``pattern=`` or ``path=`` the tool takes. A pattern names what to find; one of
hundreds of kilobytes is a value pasted by mistake, and past about 700 KB RE2 cannot even
compile it."""


def _parse_text(name: str, text: Any) -> str | None:
    if text is None or text == "":
        return None
    if not isinstance(text, str):
        raise _BadCall(f"{name} must be text, got {short_repr(text)}.")
    if len(text) > MAX_ARGUMENT_CHARS:
        raise _BadCall(
            f"{name} is {len(text):,} characters long; keep it under {MAX_ARGUMENT_CHARS:,}. "
            f"It names what to find ({name}={short_repr(text, 40)}), not the text itself."
        )
    return text


def _parse_flag(name: str, flag: Any) -> bool:
    if flag in (None, False, "false", "False", 0, ""):
        return False
    if flag in (True, "true", "True", 1):
        return True
    raise _BadCall(f"{name} must be true or false, got {short_repr(flag)}.")


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
        if key == CONVERSATION_KEY:
            return f'{CONVERSATION_KEY} is read as of a turn: call with turn=N (or turn="A-B").'
        if key.endswith("*") and key not in tool_state:
            found = listing(tool_state, pattern, prefix=key[:-1])
            messages = state_field(state, "messages")
            if key == "*" and messages is not None:  # (a state handed without its messages
                # tells nothing of what left them)
                record = clock_of(state_field(state, "tool_state"))
                found += removed_turns_note(messages, record)
            return found
        if key not in tool_state:
            return unknown_key(key, list(tool_state))
        return current_text(
            key, tool_state[key], path=path, pattern=pattern, now=current_turn(state)
        )
    except (_BadCall, PathError, PatternError) as error:
        return str(error)


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
        Field(
            description=(
                'A state key, "<toolset>/<tool>/<field>", "*" to list keys, or "@conversation" '
                "(with turn=) for what was said in a turn."
            )
        ),
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
        WithJsonSchema({"anyOf": [{"type": "integer", "minimum": 1}, {"type": "string"}]}),
        Field(
            description=(
                "Read the value as it stood at the end of this turn (1 = first); with "
                'key="@conversation", what was said in that turn, or turns "A-B".'
            )
        ),
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
    :class:`~mcp_state_versions.walk.history.ThreadHistory` is used as given, and ``None`` reads the
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
            history=history_of_run(history, runtime.config, sync=sync),
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
        pattern_ = _parse_text("pattern", pattern)
        path_ = _parse_text("path", path)
        if key_ == CONVERSATION_KEY:
            if _parse_flag("versions", versions):
                raise _BadCall(f"{CONVERSATION_KEY} has no versions: read it with turn=N.")
            conversation = history if isinstance(history, ConversationHistory) else None
            return await read_conversation(
                conversation,
                thread_of(runtime.config),
                parse_turns(turn),
                path=path_,
                pattern=pattern_,
            )
        turn_ = _parse_turn(turn)
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
            if turn_ is not None and keys_dropped(state_field(runtime.state, "tool_state")):
                answer = await resolve_turn(
                    {},
                    key_,
                    turn_,
                    current_turn=current_turn(runtime.state),
                    history=history,
                    thread_id=thread_of(runtime.config),
                )
                if not isinstance(answer, UnknownKey):
                    return await run(describe_answer, answer, path=path_, pattern=pattern_)
            return unknown_key(key_, list(tool_state))
        entries = versioned_entries(tool_state)
        if key_ not in entries:
            return (
                f"{key_} carries no version record (it was stored without this library's "
                "reducer), so only its current value can be read: call without turn= or "
                "versions=."
            )
        if all_versions and turn_ is None:
            now = current_turn(runtime.state)
            rows = await resolve_versions(
                entries[key_],
                key_,
                current_turn=now,
                history=history,
                thread_id=thread_of(runtime.config),
                limit=MODEL_VERSIONS_LIMIT,
            )
            total = entries[key_]["versions"]
            return await run(
                describe_versions, key_, total, rows, path=path_, pattern=pattern_, now=now
            )
        assert turn_ is not None
        answer = await resolve_turn(
            entries,
            key_,
            turn_,
            current_turn=current_turn(runtime.state),
            history=history,
            thread_id=thread_of(runtime.config),
        )
        return await run(
            describe_answer, answer, keys=list(tool_state), path=path_, pattern=pattern_
        )
    except (_BadCall, PathError, PatternError, TurnsError) as error:
        return str(error)
    except HistoryError as error:
        return describe_failure(error)


async def _inline(function: Callable[..., str], *args: Any, **kwargs: Any) -> str:
    return function(*args, **kwargs)


async def _in_thread(function: Callable[..., str], *args: Any, **kwargs: Any) -> str:
    return await asyncio.to_thread(function, *args, **kwargs)
