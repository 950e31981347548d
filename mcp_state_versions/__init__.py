"""Versioned session state for LangGraph agents.

Tools publish values into ``tool_state``; the reducer records, on each entry, how many values
the key has held and a bounded ring of the previous ones; ``inspect_state`` shows a model that a
key was rewritten and reads it as of an earlier turn, from the ring or, for older versions, from
the checkpointer's history along the thread's current branch.

Every public name is imported when first used (PEP 562), so ``import mcp_state_versions``
and the command line's ``--help`` and ``--version`` do not load LangGraph and LangChain
until something needs them.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .agent import SESSION_STATE_PROMPT, build_agent, run_turn, turn_config, with_session_state
    from .backends.resumes import ConcurrentResume
    from .channels import SessionState, ToolStateChannel, make_session_state, tool_state_channel
    from .checkpoint_walk import CheckpointHistory, history_for_run
    from .checkpointers import open_checkpointer
    from .clock import (
        CLOCK_KEY,
        close_turn,
        count_turns,
        current_turn,
        entries_of,
        open_turn,
        ticks_around,
        values_of,
    )
    from .history import (
        AUTO,
        ConversationHistory,
        DamagedState,
        Found,
        HistoryError,
        KeyNotSetYet,
        NeverHappened,
        NoHistory,
        NotRetained,
        StoreUnavailable,
        ThreadHistory,
        TurnAnswer,
        TurnIndex,
        TurnMessages,
        TurnSnapshot,
        UnknownKey,
        ValueEvicted,
    )
    from .middleware import SessionAgentState, SessionStateMiddleware
    from .publish import publish, state_key, tool_state_writes
    from .resolve import VersionRow, resolve_past, resolve_turn, resolve_versions
    from .retention import PruneResult, PruningInMemorySaver, PruningSqliteSaver, prune_thread
    from .runtime import LeanToolRuntime
    from .scripted import ScriptedChatModel, call
    from .state import (
        PriorVersion,
        StateEntry,
        ToolStateError,
        ToolStateReducer,
        make_merge_tool_state,
        merge_tool_state,
    )
    from .sweep import SweepPolicy, SweepReport, SweepSchedule, reclaim, sweep, sweeping
    from .threads import ThreadPage, ThreadSummary, list_threads
    from .tool import make_inspect_state, read_state_key

_WHERE = {
    "AUTO": "history",
    "CLOCK_KEY": "clock",
    "CheckpointHistory": "checkpoint_walk",
    "ConcurrentResume": "backends.resumes",
    "ConversationHistory": "history",
    "DamagedState": "history",
    "Found": "history",
    "HistoryError": "history",
    "KeyNotSetYet": "history",
    "LeanToolRuntime": "runtime",
    "NeverHappened": "history",
    "NoHistory": "history",
    "NotRetained": "history",
    "PriorVersion": "state",
    "PruneResult": "retention",
    "PruningInMemorySaver": "retention",
    "PruningSqliteSaver": "retention",
    "SESSION_STATE_PROMPT": "agent",
    "ScriptedChatModel": "scripted",
    "SessionAgentState": "middleware",
    "SessionState": "channels",
    "SessionStateMiddleware": "middleware",
    "StateEntry": "state",
    "StoreUnavailable": "history",
    "SweepPolicy": "sweep",
    "SweepReport": "sweep",
    "SweepSchedule": "sweep",
    "ThreadHistory": "history",
    "ThreadPage": "threads",
    "ThreadSummary": "threads",
    "ToolStateChannel": "channels",
    "ToolStateError": "state",
    "ToolStateReducer": "state",
    "TurnAnswer": "history",
    "TurnIndex": "history",
    "TurnMessages": "history",
    "TurnSnapshot": "history",
    "UnknownKey": "history",
    "ValueEvicted": "history",
    "VersionRow": "resolve",
    "build_agent": "agent",
    "call": "scripted",
    "close_turn": "clock",
    "count_turns": "clock",
    "current_turn": "clock",
    "entries_of": "clock",
    "history_for_run": "checkpoint_walk",
    "list_threads": "threads",
    "make_inspect_state": "tool",
    "make_merge_tool_state": "state",
    "make_session_state": "channels",
    "merge_tool_state": "state",
    "open_checkpointer": "checkpointers",
    "open_turn": "clock",
    "prune_thread": "retention",
    "publish": "publish",
    "read_state_key": "tool",
    "reclaim": "sweep",
    "resolve_past": "resolve",
    "resolve_turn": "resolve",
    "resolve_versions": "resolve",
    "run_turn": "agent",
    "state_key": "publish",
    "sweep": "sweep",
    "sweeping": "sweep",
    "ticks_around": "clock",
    "tool_state_channel": "channels",
    "tool_state_writes": "publish",
    "turn_config": "agent",
    "values_of": "clock",
    "with_session_state": "agent",
}
"""The module each public name lives in."""


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'mcp_state_versions' has no attribute {name!r}")
    try:
        value = getattr(importlib.import_module(f".{module}", __name__), name)
    except ImportError as error:
        if module != "middleware":
            raise
        # SessionStateMiddleware needs LangChain's agents package (extra "agents")
        raise ImportError(
            f"{name} needs LangChain's create_agent: pip install 'mcp-state-versions[agents]'"
        ) from error
    globals()[name] = value  # found once; later lookups do not come here
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


class _Package(types.ModuleType):
    """This package's module type: ``publish`` and ``sweep`` are functions named like the
    modules that hold them, and importing such a module sets the package's attribute of that
    name to the module; the function keeps the name, as it did when it was imported eagerly."""

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, types.ModuleType) and _WHERE.get(name) == name:
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


__all__ = [
    "AUTO",
    "CLOCK_KEY",
    "SESSION_STATE_PROMPT",
    "CheckpointHistory",
    "ConcurrentResume",
    "ConversationHistory",
    "DamagedState",
    "Found",
    "HistoryError",
    "KeyNotSetYet",
    "LeanToolRuntime",
    "NeverHappened",
    "NoHistory",
    "NotRetained",
    "PriorVersion",
    "PruneResult",
    "PruningInMemorySaver",
    "PruningSqliteSaver",
    "ScriptedChatModel",
    "SessionAgentState",
    "SessionState",
    "SessionStateMiddleware",
    "StateEntry",
    "StoreUnavailable",
    "SweepPolicy",
    "SweepReport",
    "SweepSchedule",
    "ThreadHistory",
    "ThreadPage",
    "ThreadSummary",
    "ToolStateChannel",
    "ToolStateError",
    "ToolStateReducer",
    "TurnAnswer",
    "TurnIndex",
    "TurnMessages",
    "TurnSnapshot",
    "UnknownKey",
    "ValueEvicted",
    "VersionRow",
    "build_agent",
    "call",
    "close_turn",
    "count_turns",
    "current_turn",
    "entries_of",
    "history_for_run",
    "list_threads",
    "make_inspect_state",
    "make_merge_tool_state",
    "make_session_state",
    "merge_tool_state",
    "open_checkpointer",
    "open_turn",
    "prune_thread",
    "publish",
    "read_state_key",
    "reclaim",
    "resolve_past",
    "resolve_turn",
    "resolve_versions",
    "run_turn",
    "state_key",
    "sweep",
    "sweeping",
    "ticks_around",
    "tool_state_channel",
    "tool_state_writes",
    "turn_config",
    "values_of",
    "with_session_state",
]
