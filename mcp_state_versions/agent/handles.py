"""``@state:`` handles: a tool argument that names a value in session state, now or as of a turn.

A model comparing two areas should not copy four floats out of an earlier reply (it may copy
the wrong ones, or the current ones). It passes ``a="@state:gazet/get_aoi/bbox@turn=1"`` and
``b="@state:gazet/get_aoi/bbox"``; before the tool runs, each handle is replaced by the value it
names, found exactly as ``inspect_state(key, turn=N)`` finds it
(:mod:`mcp_state_versions.walk.resolve`: the entry's ring, then the run's own history), and the
tool's reply ends with a receipt, ``[state used: gazet/get_aoi/bbox@turn=1,
gazet/get_aoi/bbox@turn=4]``, so the model (and whoever reads the transcript) can see which versions
went in.

A handle that does not resolve stops the call: the tool does not run, and the model gets, as an
error reply, the same distinct answer a read would give (the turn never happened, is no longer
retained, the key was not set yet, no such key, with the keys it may have meant). Running the
tool with the handle's text, or with the current value in place of an old one, is the silent
substitution this library exists to prevent.

Only a whole argument is a handle. Text that merely contains ``@state:`` (inside a longer
string, or anywhere inside a list or an object) is refused with the way to pass one, rather
than passed on unresolved: a tool handed ``"compare @state:x with y"`` would act on the words.

One :class:`StateHandles` serves every place a tool call runs: ``ToolNode``'s
``wrap_tool_call``/``awrap_tool_call`` (``build_agent`` installs it), ``SessionStateMiddleware``,
and, as :class:`ResolveStateHandles`, the MCP adapters' tool-call interceptors.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command

from ..backends import NeedsAsync, run_sync
from ..state.clock import current_turn, entries_of, state_field
from ..walk.history import AUTO, Found, HistoryError, HistoryOption, ThreadHistory
from ..walk.resolve import history_of_run, resolve_turn, thread_of, versioned_entries
from ..wording.answers import (
    describe_answer,
    describe_failure,
    eviction_note,
    short_repr,
    unknown_key,
)

__all__ = [
    "HANDLE_PREFIX",
    "HandleRefused",
    "ResolveStateHandles",
    "StateHandles",
    "resolve_handles",
]

HANDLE_PREFIX = "@state:"

_HANDLE = re.compile(r"@state:(?P<key>[^\s@]+)(?:@turn=(?P<turn>[0-9]{1,12}))?", re.ASCII)

_HOW = (
    'A handle must be the whole value of an argument: "@state:<key>" for the current value, '
    '"@state:<key>@turn=N" for the value at the end of turn N.'
)


class HandleRefused(ValueError):
    """A handle that cannot be used; the message is what the model is told instead."""


@dataclass(frozen=True, slots=True)
class _Handle:
    argument: str
    key: str
    turn: int | None


def _handles_in(tool: str, args: Mapping[str, Any]) -> list[_Handle]:
    """The handles among ``args``, refusing any ``@state:`` text that is not a whole argument."""
    found = []
    for name, value in args.items():
        if isinstance(value, str):
            if match := _HANDLE.fullmatch(value.strip()):
                turn = match.group("turn")
                found.append(_Handle(name, match.group("key"), int(turn) if turn else None))
            elif HANDLE_PREFIX in value:
                raise HandleRefused(
                    f"{tool} did not run: argument {name} has {HANDLE_PREFIX!r} inside a longer "
                    f"text ({short_repr(value, 60)}), and handles are not filled into text. "
                    f"{_HOW} To use a value inside text, read it with inspect_state first."
                )
        elif _holds_handle(value):
            raise HandleRefused(
                f"{tool} did not run: argument {name} has a {HANDLE_PREFIX!r} handle inside a "
                f"list or object, and handles are resolved only as a whole argument. {_HOW} "
                "Pass the handle as its own argument, or read the value with inspect_state and "
                "pass the value."
            )
    return found


def _holds_handle(value: Any) -> bool:
    if isinstance(value, str):
        return HANDLE_PREFIX in value
    if isinstance(value, Mapping):
        return any(_holds_handle(key) or _holds_handle(item) for key, item in value.items())
    if isinstance(value, list | tuple):
        return any(_holds_handle(item) for item in value)
    return False


def _label(handle: _Handle, now: int) -> str:
    return f"{handle.key}@turn={handle.turn if handle.turn is not None else now}"


async def resolve_handles(
    tool: str,
    args: Mapping[str, Any],
    state: Any,
    *,
    history: ThreadHistory | None,
    thread_id: str | None,
) -> tuple[dict[str, Any], list[str]]:
    """``args`` with each handle replaced by its value, and the receipt's entries.

    Raises :class:`HandleRefused` with the model-facing text when a handle cannot be used.
    ``args`` without a handle come back as they are, with no receipt.
    """
    handles = _handles_in(tool, args)
    if not handles:
        return dict(args), []
    return await _values(tool, handles, args, state, history=history, thread_id=thread_id)


async def _resolved_call(
    option: HistoryOption,
    tool: str,
    args: Mapping[str, Any],
    state: Any,
    config: Any,
    *,
    sync: bool,
) -> tuple[dict[str, Any], list[str]]:
    """:func:`resolve_handles` for a call inside a run, whose history (``option``, as for
    ``inspect_state``) is looked up only when the call has a handle: most calls have none, and
    they pay for the scan of their arguments alone."""
    handles = _handles_in(tool, args)
    if not handles:
        return dict(args), []
    history = history_of_run(option, config, sync=sync)
    return await _values(tool, handles, args, state, history=history, thread_id=thread_of(config))


async def _values(
    tool: str,
    handles: list[_Handle],
    args: Mapping[str, Any],
    state: Any,
    *,
    history: ThreadHistory | None,
    thread_id: str | None,
) -> tuple[dict[str, Any], list[str]]:
    """``args`` with ``handles`` replaced by their values, and the receipt's entries."""
    tool_state = state_field(state, "tool_state")
    present = entries_of(tool_state) if isinstance(tool_state, Mapping) else {}
    entries = versioned_entries(present)
    now = current_turn(state)
    resolved, used = dict(args), []
    for handle in handles:
        why = f"{tool} did not run: argument {handle.argument} is the handle "
        why += f"{HANDLE_PREFIX}{handle.key}{'' if handle.turn is None else f'@turn={handle.turn}'}"
        why += ", which did not resolve. "
        if handle.key not in present:
            raise HandleRefused(why + unknown_key(handle.key, list(present)))
        if handle.turn is None or handle.key not in entries:
            entry = present[handle.key]
            if handle.turn is not None:  # a plain value: only the present can be read
                raise HandleRefused(
                    why + f"{handle.key} carries no version record, so only its current value "
                    f"can be used: {HANDLE_PREFIX}{handle.key}"
                )
            if handle.key in entries and "value" not in entry:
                raise HandleRefused(why + eviction_note(handle.key, entry))
            resolved[handle.argument] = entry["value"] if handle.key in entries else entry
        else:
            if handle.turn < 1:
                raise HandleRefused(why + "Turns count from 1 (the first user message).")
            try:
                answer = await resolve_turn(
                    entries,
                    handle.key,
                    handle.turn,
                    current_turn=now,
                    history=history,
                    thread_id=thread_id,
                )
            except HistoryError as error:
                raise HandleRefused(why + describe_failure(error)) from None
            if not isinstance(answer, Found):
                raise HandleRefused(why + describe_answer(answer, keys=list(present)))
            resolved[handle.argument] = answer.value
        used.append(_label(handle, now))
    return resolved, used


def receipt(used: list[str]) -> str:
    return f"[state used: {', '.join(used)}]"


def with_receipt(result: Any, used: list[str], tool_call_id: str | None) -> Any:
    """``result`` (a ToolMessage, a Command carrying one, or an MCP result) with the receipt
    appended to the reply the model reads."""
    if not used:
        return result
    text = receipt(used)
    if isinstance(result, ToolMessage):
        return _noted(result, text)
    if isinstance(result, Command) and isinstance(result.update, dict):
        messages = result.update.get("messages")
        if isinstance(messages, list):
            noted = [
                _noted(m, text)
                if isinstance(m, ToolMessage) and m.tool_call_id == tool_call_id
                else m
                for m in messages
            ]
            return replace(result, update={**result.update, "messages": noted})
        return result
    content = getattr(result, "content", None)
    if isinstance(content, list) and hasattr(result, "model_copy"):  # mcp.types.CallToolResult
        from mcp.types import TextContent

        return result.model_copy(
            update={"content": [*content, TextContent(type="text", text=text)]}
        )
    return result


def _noted(message: ToolMessage, text: str) -> ToolMessage:
    content = message.content
    if isinstance(content, str):
        new: Any = f"{content}\n{text}" if content else text
    else:
        new = [*content, {"type": "text", "text": text}]
    return message.model_copy(update={"content": new})


def _refusal(error: HandleRefused, tool_call_id: str | None, name: str | None) -> ToolMessage:
    """The error reply a call that did not run gets in place of the tool's."""
    return ToolMessage(str(error), tool_call_id=tool_call_id, name=name, status="error")


class StateHandles:
    """Resolve ``@state:`` handles in every tool call a ``ToolNode`` runs.

    ``ToolNode(tools, wrap_tool_call=handles.wrap_tool_call,
    awrap_tool_call=handles.awrap_tool_call)`` with ``handles = StateHandles()``; ``history``
    is as for :func:`~mcp_state_versions.agent.inspect_state.make_inspect_state` (``AUTO``:
    the run's own checkpointer). ``build_agent`` and ``SessionStateMiddleware`` install one
    themselves.
    """

    def __init__(self, history: HistoryOption = AUTO) -> None:
        self.history = history

    async def _resolved(
        self, request: ToolCallRequest, *, sync: bool
    ) -> tuple[ToolCallRequest | ToolMessage, list[str]]:
        call = request.tool_call
        if call["name"] == "inspect_state":  # it reads keys: "@state:<key>" there is the key
            return request, []
        config: RunnableConfig | None = getattr(request.runtime, "config", None)
        try:
            args, used = await _resolved_call(
                self.history, call["name"], call.get("args") or {}, request.state, config, sync=sync
            )
        except HandleRefused as error:
            return _refusal(error, call["id"], call.get("name")), []
        if not used:
            return request, []
        return request.override(tool_call={**call, "args": args}), used

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        execute: Callable[[ToolCallRequest], ToolMessage | Command],
    ) -> ToolMessage | Command:
        try:
            prepared, used = run_sync(self._resolved(request, sync=True))
        except NeedsAsync:
            call = request.tool_call
            prepared, used = _refusal(_NEEDS_ASYNC, call["id"], call.get("name")), []
        if isinstance(prepared, ToolMessage):
            return prepared
        return with_receipt(execute(prepared), used, request.tool_call["id"])

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        execute: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command]],
    ) -> ToolMessage | Command:
        prepared, used = await self._resolved(request, sync=False)
        if isinstance(prepared, ToolMessage):
            return prepared
        return with_receipt(await execute(prepared), used, request.tool_call["id"])


_NEEDS_ASYNC = HandleRefused(
    "The tool did not run: a handle names a turn older than the versions kept with the key, and "
    "reading it needs the conversation's checkpoint history, which this deployment's "
    "checkpointer only offers to asynchronous runs (ainvoke/astream). Do not pass the current "
    "value in its place; say the earlier value is not available here."
)


class ResolveStateHandles:
    """A tool-call interceptor for ``langchain_mcp_adapters``: handles in an MCP tool's
    arguments are resolved before the server is called, with the receipt in the reply.

    Put it first in ``tool_interceptors`` (``load_publishing_tools`` does). Inside
    ``build_agent`` or ``SessionStateMiddleware`` the handles are already resolved when it runs,
    and it passes the call through.
    """

    def __init__(self, history: HistoryOption = AUTO) -> None:
        self.history = history

    async def __call__(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        runtime = request.runtime
        if runtime is None or getattr(runtime, "tool_call_id", None) is None:
            return await handler(request)  # outside an agent: no state to resolve from
        config = getattr(runtime, "config", None)
        try:
            args, used = await _resolved_call(
                self.history, request.name, request.args, runtime.state, config, sync=False
            )
        except HandleRefused as error:
            return _refusal(error, runtime.tool_call_id, request.name)
        if not used:
            return await handler(request)
        result = await handler(request.override(args=args))
        return with_receipt(result, used, runtime.tool_call_id)
