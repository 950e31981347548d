"""A stateful property test: any sequence of turns, trims, summaries, edits, forks, prunes and
reloads leaves every ``(key, turn)`` answer equal to a careful person's notebook.

Two conversations take the same steps, one with a ring of 8 and one without (so its older reads
all walk checkpoints); after every step both are checked against the notebook, with history
and from the rings alone. Runs are synchronous (``graph.invoke``), so the walk goes through the
savers' synchronous API as a tool under ``invoke`` does. In-memory runs 200 examples in the
default test run; SQLite and PostgreSQL run fixed seeds.
"""

from __future__ import annotations

import sqlite3
from typing import Any
from uuid import uuid4

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from langchain_core.messages import HumanMessage, RemoveMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from mcp_state_versions import prune_thread
from mcp_state_versions.backends import run_sync

from .conftest import PG_DSN, postgres_unavailable
from .conversation import Conversation, agent_graph

KEYS = ["a", "b", "c"]
writes = st.lists(
    st.tuples(st.sampled_from(KEYS), st.sampled_from(["1", "2", "3", "x"])), max_size=4
)


class ClockMachine(RuleBasedStateMachine):
    """Subclassed per backend: ``open_saver`` returns ``(saver, close)``."""

    def open_saver(self) -> tuple[Any, Any]:
        return InMemorySaver(), lambda: None

    @initialize()
    def start(self) -> None:
        self.saver, self._close = self.open_saver()
        thread = f"machine-{uuid4().hex[:12]}"
        self.convs = [
            Conversation(agent_graph(self.saver, ring), self.saver, f"{thread}-{ring}", sync=True)
            for ring in (8, 0)
        ]

    def teardown(self) -> None:
        close = getattr(self, "_close", None)
        if close is not None:
            close()

    @property
    def turns(self) -> int:
        return len(self.convs[0].notebook.ends)

    @rule(assignments=writes)
    def user_turn(self, assignments: list[tuple[str, str]]) -> None:
        text = "put " + " ".join(f"{k}={v}" for k, v in assignments) if assignments else "chat"
        for conv in self.convs:
            run_sync(conv.say(text))

    @precondition(lambda self: self.turns > 0)
    @rule()
    def trim(self) -> None:
        for conv in self.convs:
            messages = conv.graph.get_state(conv.config).values["messages"]
            humans = [m for m in messages if isinstance(m, HumanMessage)][:-2]
            if humans:
                conv.graph.update_state(
                    conv.config,
                    {"messages": [RemoveMessage(id=m.id) for m in humans]},
                    as_node="tools",
                )

    @precondition(lambda self: self.turns > 0)
    @rule()
    def summarize(self) -> None:
        for conv in self.convs:
            messages = conv.graph.get_state(conv.config).values["messages"]
            update = [
                RemoveMessage(id=REMOVE_ALL_MESSAGES),
                HumanMessage("Summary: values were published."),
                *messages[-2:],
            ]
            conv.graph.update_state(conv.config, {"messages": update}, as_node="tools")

    @precondition(lambda self: self.turns > 0)
    @rule(key=st.sampled_from(KEYS), value=st.sampled_from(["E1", "E2"]))
    def edit(self, key: str, value: str) -> None:
        for conv in self.convs:
            run_sync(conv.edit(key, value))

    @precondition(lambda self: self.turns > 0)
    @rule(data=st.data(), assignments=writes)
    def fork(self, data: st.DataObject, assignments: list[tuple[str, str]]) -> None:
        book = self.convs[0].notebook
        turn = data.draw(st.integers(max(book.retained_from, 1), self.turns), label="fork at")
        text = "put " + " ".join(f"{k}={v}" for k, v in assignments) if assignments else "chat"
        for conv in self.convs:
            run_sync(conv.fork(turn, text))

    @precondition(lambda self: self.turns > 1)
    @rule(data=st.data())
    def prune(self, data: st.DataObject) -> None:
        keep = data.draw(st.integers(1, self.turns), label="keep turns")
        for conv in self.convs:
            result = run_sync(prune_thread(conv.saver, conv.thread_id, keep_turns=keep))
            conv.notebook.retained_from = max(conv.notebook.retained_from, result.retained_turns[0])

    @rule()
    def reload(self) -> None:
        """A restart: new graph objects (and, on SQL backends, a new connection)."""
        self.saver = self.reopen()
        for conv, ring in zip(self.convs, (8, 0), strict=True):
            conv.saver = self.saver
            conv.graph = agent_graph(self.saver, ring)

    def reopen(self) -> Any:
        return self.saver

    @invariant()
    def answers_equal_the_notebook(self) -> None:
        if not hasattr(self, "convs"):
            return
        for conv in self.convs:
            run_sync(conv.check())
            run_sync(conv.check(ring_only=True))


TestClockOnMemory = ClockMachine.TestCase
TestClockOnMemory.settings = settings(
    max_examples=200,
    stateful_step_count=10,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


class SqliteMachine(ClockMachine):
    path: str = ""

    def open_saver(self) -> tuple[Any, Any]:
        from langgraph.checkpoint.sqlite import SqliteSaver

        self._connection = sqlite3.connect(self.path, check_same_thread=False)
        return SqliteSaver(self._connection), lambda: self._connection.close()

    def reopen(self) -> Any:
        from langgraph.checkpoint.sqlite import SqliteSaver

        self._connection.close()
        self._connection = sqlite3.connect(self.path, check_same_thread=False)
        return SqliteSaver(self._connection)


class PostgresMachine(ClockMachine):
    def open_saver(self) -> tuple[Any, Any]:
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg import Connection
        from psycopg.rows import dict_row

        self._connection = Connection.connect(
            PG_DSN, autocommit=True, prepare_threshold=0, row_factory=dict_row
        )
        saver = PostgresSaver(self._connection)  # type: ignore[arg-type]
        saver.setup()
        return saver, lambda: self._connection.close()

    def reopen(self) -> Any:
        self._connection.close()
        saver, _ = self.open_saver()
        return saver


def _run_derandomized(machine: type[ClockMachine], examples: int) -> None:
    """A fixed sequence of examples (hypothesis derives the seed from the test, not at random)."""
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=examples,
            stateful_step_count=10,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )


def test_sqlite_fixed_seeds(tmp_path: Any) -> None:
    SqliteMachine.path = str(tmp_path / "machine.sqlite")
    _run_derandomized(SqliteMachine, 30)


@pytest.mark.postgres
def test_postgres_fixed_seeds() -> None:
    import psycopg

    try:
        psycopg.connect(PG_DSN, connect_timeout=3).close()
    except psycopg.OperationalError as error:
        postgres_unavailable(error)
    _run_derandomized(PostgresMachine, 20)
