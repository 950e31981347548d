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
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .agent.build import (
        SESSION_STATE_PROMPT,
        build_agent,
        run_turn,
        turn_config,
        with_session_state,
    )
    from .agent.inspect_state import make_inspect_state, read_state_key
    from .agent.middleware import SessionAgentState, SessionStateMiddleware
    from .agent.publish import publish, state_key, tool_state_writes
    from .agent.runtime import LeanToolRuntime
    from .demo.scripted import ScriptedChatModel, call
    from .retention.prune import PruneResult, prune_thread
    from .retention.sweep import SweepPolicy, SweepReport, SweepSchedule, reclaim, sweep, sweeping
    from .savers.memory import PruningInMemorySaver
    from .savers.resumes import ConcurrentResume
    from .savers.specs import open_checkpointer
    from .savers.sqlite import PruningSqliteSaver
    from .state.clock import (
        CLOCK_KEY,
        close_turn,
        count_turns,
        current_turn,
        entries_of,
        open_turn,
        ticks_around,
        values_of,
    )
    from .state.reducer import (
        PriorVersion,
        StateEntry,
        ToolStateError,
        ToolStateReducer,
        make_merge_tool_state,
        merge_tool_state,
    )
    from .storage.channels import (
        SessionState,
        ToolStateChannel,
        make_session_state,
        tool_state_channel,
    )
    from .walk.checkpoints import CheckpointHistory, history_for_run
    from .walk.history import (
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
    from .walk.resolve import VersionRow, resolve_past, resolve_turn, resolve_versions
    from .walk.threads import ThreadPage, ThreadSummary, list_threads

_WHERE = {
    "AUTO": "walk.history",
    "CLOCK_KEY": "state.clock",
    "CheckpointHistory": "walk.checkpoints",
    "ConcurrentResume": "savers.resumes",
    "ConversationHistory": "walk.history",
    "DamagedState": "walk.history",
    "Found": "walk.history",
    "HistoryError": "walk.history",
    "KeyNotSetYet": "walk.history",
    "LeanToolRuntime": "agent.runtime",
    "NeverHappened": "walk.history",
    "NoHistory": "walk.history",
    "NotRetained": "walk.history",
    "PriorVersion": "state.reducer",
    "PruneResult": "retention.prune",
    "PruningInMemorySaver": "savers.memory",
    "PruningSqliteSaver": "savers.sqlite",
    "SESSION_STATE_PROMPT": "agent.build",
    "ScriptedChatModel": "demo.scripted",
    "SessionAgentState": "agent.middleware",
    "SessionState": "storage.channels",
    "SessionStateMiddleware": "agent.middleware",
    "StateEntry": "state.reducer",
    "StoreUnavailable": "walk.history",
    "SweepPolicy": "retention.sweep",
    "SweepReport": "retention.sweep",
    "SweepSchedule": "retention.sweep",
    "ThreadHistory": "walk.history",
    "ThreadPage": "walk.threads",
    "ThreadSummary": "walk.threads",
    "ToolStateChannel": "storage.channels",
    "ToolStateError": "state.reducer",
    "ToolStateReducer": "state.reducer",
    "TurnAnswer": "walk.history",
    "TurnIndex": "walk.history",
    "TurnMessages": "walk.history",
    "TurnSnapshot": "walk.history",
    "UnknownKey": "walk.history",
    "ValueEvicted": "walk.history",
    "VersionRow": "walk.resolve",
    "build_agent": "agent.build",
    "call": "demo.scripted",
    "close_turn": "state.clock",
    "count_turns": "state.clock",
    "current_turn": "state.clock",
    "entries_of": "state.clock",
    "history_for_run": "walk.checkpoints",
    "list_threads": "walk.threads",
    "make_inspect_state": "agent.inspect_state",
    "make_merge_tool_state": "state.reducer",
    "make_session_state": "storage.channels",
    "merge_tool_state": "state.reducer",
    "open_checkpointer": "savers.specs",
    "open_turn": "state.clock",
    "prune_thread": "retention.prune",
    "publish": "agent.publish",
    "read_state_key": "agent.inspect_state",
    "reclaim": "retention.sweep",
    "resolve_past": "walk.resolve",
    "resolve_turn": "walk.resolve",
    "resolve_versions": "walk.resolve",
    "run_turn": "agent.build",
    "state_key": "agent.publish",
    "sweep": "retention.sweep",
    "sweeping": "retention.sweep",
    "ticks_around": "state.clock",
    "tool_state_channel": "storage.channels",
    "tool_state_writes": "agent.publish",
    "turn_config": "agent.build",
    "values_of": "state.clock",
    "with_session_state": "agent.build",
}
"""The module each public name lives in."""


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'mcp_state_versions' has no attribute {name!r}")
    try:
        value = getattr(importlib.import_module(f".{module}", __name__), name)
    except ImportError as error:
        if module != "agent.middleware":
            raise
        # SessionStateMiddleware needs LangChain's agents package (extra "agents")
        raise ImportError(
            f"{name} needs LangChain's create_agent: pip install 'mcp-state-versions[agents]'"
        ) from error
    globals()[name] = value  # found once; later lookups do not come here
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


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
