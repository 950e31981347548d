"""Versioned session state for LangGraph agents.

Tools publish values into ``tool_state``; the reducer records, on each entry, how many values
the key has held and a bounded ring of the previous ones; ``inspect_state`` shows a model that a
key was rewritten and reads it as of an earlier turn, from the ring or, for older versions, from
the checkpointer's history along the thread's current branch.
"""

from .agent import SESSION_STATE_PROMPT, build_agent, run_turn, turn_config, with_session_state
from .backends.resumes import ConcurrentResume
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
    TurnSnapshot,
    UnknownKey,
    ValueEvicted,
)
from .publish import publish, state_key, tool_state_writes
from .resolve import VersionRow, resolve_past, resolve_turn, resolve_versions
from .retention import PruneResult, PruningInMemorySaver, PruningSqliteSaver, prune_thread
from .scripted import ScriptedChatModel
from .state import (
    PriorVersion,
    SessionState,
    StateEntry,
    ToolStateError,
    make_merge_tool_state,
    make_session_state,
    merge_tool_state,
)
from .storage import ToolStateChannel, tool_state_channel
from .sweep import SweepPolicy, SweepReport, SweepSchedule, reclaim, sweep, sweeping
from .threads import ThreadPage, ThreadSummary, list_threads
from .tool import make_inspect_state, read_state_key


def __getattr__(name: str) -> object:
    # SessionStateMiddleware needs LangChain's agents package (extra "agents"); import it only
    # when asked for, so the rest of the library works without it.
    if name in ("SessionStateMiddleware", "SessionAgentState"):
        try:
            from . import middleware
        except ImportError as error:  # pragma: no cover - depends on the environment
            raise ImportError(
                f"{name} needs LangChain's create_agent: pip install 'mcp-state-versions[agents]'"
            ) from error
        return getattr(middleware, name)
    raise AttributeError(f"module 'mcp_state_versions' has no attribute {name!r}")


__all__ = [
    "AUTO",
    "CLOCK_KEY",
    "SESSION_STATE_PROMPT",
    "CheckpointHistory",
    "ConcurrentResume",
    "DamagedState",
    "Found",
    "HistoryError",
    "KeyNotSetYet",
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
    "TurnAnswer",
    "TurnIndex",
    "TurnSnapshot",
    "UnknownKey",
    "ValueEvicted",
    "VersionRow",
    "build_agent",
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
