"""A stateful property test: any sequence of turns (in any durability mode, with stamps that
lie), trims, summaries, edits (one key, or the whole tool_state written back), Overwrites, forks,
prunes and reloads leaves every ``(key, turn)`` answer equal to a careful person's notebook.

Two conversations take the same steps, one with a ring of 8 and one without (so its older reads
all walk checkpoints); after every step both are checked against the notebook, with history
and from the rings alone. Runs are synchronous (``graph.invoke``), so the walk goes through the
savers' synchronous API as a tool under ``invoke`` does. In-memory runs 200 examples in the
default test run; SQLite and PostgreSQL run fixed seeds.
"""

from __future__ import annotations

import contextvars
import sqlite3
import threading
from dataclasses import dataclass, field
from typing import Any
from uuid import uuid4

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import event as note_event
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
from langgraph.checkpoint.base import WRITES_IDX_MAP
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.types import Command

from mcp_state_versions import ConcurrentResume, PruningInMemorySaver, prune_thread
from mcp_state_versions.backends import run_sync
from mcp_state_versions.state.reducer import TURN_METADATA_KEY
from mcp_state_versions.walk.checkpoints import CheckpointHistory

from ..conftest import PG_DSN, postgres_unavailable
from ..conversation import PUT, Conversation, Notebook, agent_graph, subgraph_host

KEYS = ["a", "b", "c"]
writes = st.lists(
    st.tuples(st.sampled_from(KEYS), st.sampled_from(["1", "2", "3", "x"])), max_size=4
)


class _OnASaver(RuleBasedStateMachine):
    """A machine on one saver: ``open_saver`` returns ``(saver, close)``, ``reopen`` the same
    storage through a new saver (a restart); subclassed per backend."""

    saver: Any

    def open_saver(self) -> tuple[Any, Any]:
        return InMemorySaver(), lambda: None

    def reopen(self) -> Any:
        return self.saver

    def teardown(self) -> None:
        close = getattr(self, "_close", None)
        if close is not None:
            close()


class ClockMachine(_OnASaver):
    """Turns, trims, summaries, edits, forks, prunes and reloads, in any order."""

    #: The node an operator's message edits are made as.
    last_node = "tools"

    def graph_for(self, saver: Any, ring: int) -> Any:
        return agent_graph(saver, ring)

    @initialize()
    def start(self) -> None:
        self.saver, self._close = self.open_saver()
        thread = f"machine-{uuid4().hex[:12]}"
        self.convs = [
            Conversation(
                self.graph_for(self.saver, ring), self.saver, f"{thread}-{ring}", sync=True
            )
            for ring in (8, 0)
        ]

    @property
    def turns(self) -> int:
        return len(self.convs[0].notebook.ends)

    @rule(
        assignments=writes,
        durability=st.sampled_from(["async", "sync", "exit"]),
        stamp=st.none() | st.integers(0, 50),
    )
    def user_turn(
        self, assignments: list[tuple[str, str]], durability: str, stamp: int | None
    ) -> None:
        """A turn in any durability mode, its checkpoints stamped with any turn (a stamp is the
        caller's word: no answer may depend on it)."""
        text = "put " + " ".join(f"{k}={v}" for k, v in assignments) if assignments else "chat"
        for conv in self.convs:
            config = dict(conv.config)
            if stamp is not None:
                config["metadata"] = {TURN_METADATA_KEY: stamp}
            run_sync(conv.say(text, config, durability=durability))

    @precondition(lambda self: bool(self.convs[0].notebook.current))
    @rule(data=st.data(), value=st.sampled_from(["W1", "W2"]))
    def edit_in_place(self, data: st.DataObject, value: str) -> None:
        """An operator's whole tool_state from get_state, one value changed, written back."""
        keys = sorted(self.convs[0].notebook.current)
        key = data.draw(st.sampled_from(keys), label="key edited in place")
        for conv in self.convs:
            run_sync(conv.edit_in_place(key.removeprefix(PUT), value))

    @precondition(lambda self: self.turns > 0)
    @rule(plain=st.booleans(), data=st.data())
    def overwrite(self, plain: bool, data: st.DataObject) -> None:
        """An operator's Overwrite of tool_state with some keys as readers see them (no
        clock): the rest are dropped, and a later turn may publish them again."""
        held = sorted(self.convs[0].notebook.current)
        kept = data.draw(st.lists(st.sampled_from(held), unique=True) if held else st.just([]))
        for conv in self.convs:
            run_sync(conv.overwrite([key.removeprefix(PUT) for key in kept], plain=plain))

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
                    as_node=self.last_node,
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
            conv.graph.update_state(conv.config, {"messages": update}, as_node=self.last_node)

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
            conv.graph = self.graph_for(self.saver, ring)

    @invariant()
    def answers_equal_the_notebook(self) -> None:
        if not hasattr(self, "convs"):
            return
        for conv in self.convs:
            run_sync(conv.check())
            run_sync(conv.check(ring_only=True))


def _random(examples: int, steps: int) -> settings:
    return settings(
        max_examples=examples,
        stateful_step_count=steps,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )


TestClockOnMemory = ClockMachine.TestCase


class PersistentSubgraphMachine(ClockMachine):
    """The same steps on a parent whose agent is a persistent subgraph (``checkpointer=True``)
    sharing ``tool_state``: its own newest state must never stand in for the parent's branch
    (after a fork, an edit, a prune or a reload)."""

    last_node = "close_turn"

    def graph_for(self, saver: Any, ring: int) -> Any:
        return subgraph_host(saver, ring, persistent=True)


TestPersistentSubgraphOnMemory = PersistentSubgraphMachine.TestCase
TestPersistentSubgraphOnMemory.settings = _random(60, 10)
TestClockOnMemory.settings = _random(200, 10)


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


_RUN: contextvars.ContextVar[int | None] = contextvars.ContextVar("machine_run", default=None)
"""Which of two resuming runs the current thread (or a background write of it) belongs to."""


@dataclass
class _Plan:
    """The order two resumes of checkpoint ``paused`` store their results there: both read
    it first, then run ``first`` stores, then the other (right after, or with
    ``after_its_end`` once the first run ended)."""

    paused: str
    first: int
    after_its_end: bool
    both_read: threading.Barrier = field(default_factory=lambda: threading.Barrier(2, timeout=60))
    first_done: threading.Event = field(default_factory=threading.Event)
    read: set[int] = field(default_factory=set)


class _OrderedResumes(PruningInMemorySaver):
    """The library's in-memory saver, taking two resumes of one checkpoint in the order a
    :class:`_Plan` sets (no plan: as it is)."""

    plan: _Plan | None = None

    def _on_paused(self, config: Any) -> tuple[_Plan, int] | None:
        plan, run = self.plan, _RUN.get()
        if plan is None or run is None:
            return None
        return (plan, run) if config["configurable"].get("checkpoint_id") == plan.paused else None

    def get_tuple(self, config: Any) -> Any:
        found = super().get_tuple(config)
        if (on := self._on_paused(config)) is not None and on[1] not in on[0].read:
            on[0].read.add(on[1])
            on[0].both_read.wait()  # each run loaded the checkpoint it resumes
        return found

    def put_writes(self, config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        on = self._on_paused(config)
        if on is None or all(channel in WRITES_IDX_MAP for channel, _ in writes):
            return super().put_writes(config, writes, task_id, task_path)
        plan, run = on
        if run != plan.first:
            assert plan.first_done.wait(timeout=60), "the first resume never stored"
        try:
            return super().put_writes(config, writes, task_id, task_path)
        finally:
            if run == plan.first and not plan.after_its_end:
                plan.first_done.set()


class InterleavedMachine(_OnASaver):
    """Two runs at once on one thread, their steps interleaved in an order hypothesis draws,
    with prunes between any two steps and reloads between runs; and (on the library's
    in-memory saver) one interrupt resumed by two runs at once.

    One run continues the thread's head; the other forks from the end of an earlier turn (or
    from the head too: two runs from one checkpoint). A later run may continue the branch that
    is not the newest, in any durability mode. Each ends on a branch of its own, and
    the thread's current branch is the one whose last step came last. Every ``(key, turn)``
    answer read along each branch, as a run on it reads (from its own checkpoint, not the
    thread's newest), must equal that branch's notebook: never the other branch's value,
    and nothing a prune of one branch took from the other.
    """

    def open_saver(self) -> tuple[Any, Any]:
        # The library's in-memory saver: it checks two runs storing on one checkpoint.
        return _OrderedResumes(), lambda: None

    @initialize()
    def start(self) -> None:
        self.saver, self._close = self.open_saver()
        thread = f"interleaved-{uuid4().hex[:12]}"
        self.conv = Conversation(agent_graph(self.saver, 0), self.saver, thread, sync=True)
        #: The branch the last two runs left beside the current one: (tip, notebook).
        self.other: tuple[str, Notebook] | None = None
        run_sync(self.conv.say("put a=1"))  # a turn to fork from, so runs interleave at once

    @property
    def turns(self) -> int:
        return len(self.conv.notebook.ends)

    @rule(assignments=writes)
    def user_turn(self, assignments: list[tuple[str, str]]) -> None:
        run_sync(self.conv.say(_text(assignments)))
        self.other = None  # the machine follows the current branch and the last one left

    @rule()
    def reload(self) -> None:
        self.saver = self.reopen()
        self.conv.saver = self.saver
        self.conv.graph = agent_graph(self.saver, 0)

    @precondition(lambda self: self.turns > 0)
    @rule(data=st.data(), first=writes, second=writes)
    def two_runs_at_once(
        self, data: st.DataObject, first: list[tuple[str, str]], second: list[tuple[str, str]]
    ) -> None:
        conv, book = self.conv, self.conv.notebook
        fork_at = data.draw(st.integers(max(book.retained_from, 1), self.turns), label="fork at")
        head = conv.graph.get_state(conv.config).config["configurable"]["checkpoint_id"]
        # The end of the turn as the branch now holds it (a prune may have replaced the
        # checkpoint that first ended it by a later one that still holds its state).
        chain = run_sync(CheckpointHistory(self.saver)._chain(conv.thread_id))
        found = run_sync(chain.end_of_turn_confirmed(fork_at))
        assert found is not None
        starts = {"head": head, "fork": str(chain.links[found][0])}
        texts = {"head": _text(first), "fork": _text(second)}
        runs = {
            name: conv.graph.stream(
                {"messages": [HumanMessage(texts[name])]},
                {"configurable": {"thread_id": conv.thread_id, "checkpoint_id": start}},
                stream_mode="checkpoints",
                durability="sync",
            )
            for name, start in starts.items()
        }
        tips: dict[str, str] = {}
        last = ""
        try:
            while runs:
                # Both runs start (load the checkpoint they continue) before anything is
                # pruned: a run asked to continue a checkpoint already deleted is another matter.
                unstarted = sorted(set(runs) - set(tips))
                name = data.draw(st.sampled_from(unstarted or sorted(runs)), label="next step")
                event = next(runs[name], None)
                if event is None:
                    del runs[name]
                    continue
                tips[name], last = event["config"]["configurable"]["checkpoint_id"], name
                if len(tips) == 2 and data.draw(st.booleans(), label="prune after this step"):
                    note_event("a prune between two steps of two runs")
                    keep = data.draw(st.integers(1, self.turns + 1), label="keep turns")
                    run_sync(prune_thread(self.saver, conv.thread_id, keep_turns=keep))
        finally:
            # An example hypothesis abandons mid-draw leaves runs unfinished: close them now,
            # while their saver's connection is open, not when the garbage collector gets to
            # them after teardown closed it (their last checkpoint's write then ran on a
            # closed SQLite connection, and crashed the process).
            for unfinished in runs.values():
                unfinished.close()
        books = {"head": _copy(book), "fork": _copy(book)}
        books["head"].turn(first)
        books["fork"].fork(fork_at)
        books["fork"].turn(second)
        ends = {
            "head": [*conv.end_ids, tips["head"]],
            "fork": [*conv.end_ids[:fork_at], tips["fork"]],
        }
        other = "fork" if last == "head" else "head"
        conv.notebook, conv.end_ids = books[last], ends[last]
        self.other = (tips[other], books[other])
        for name, tip in tips.items():
            # What retention kept of each branch, which the answers are then checked within;
            # the turn each run added is never among what went.
            index = run_sync(CheckpointHistory(self.saver, checkpoint_id=tip).turns(conv.thread_id))
            assert index.total == len(books[name].ends) and index.retained[-1] == index.total
            books[name].retained_from = max(books[name].retained_from, index.retained.start)

    @precondition(lambda self: self.other is not None)
    @rule(assignments=writes, durability=st.sampled_from(["async", "sync", "exit"]))
    def continue_the_other_branch(
        self, assignments: list[tuple[str, str]], durability: str
    ) -> None:
        """A run continues the branch that is not the thread's newest (its tip named by the
        run's config), in any durability mode: it reads and writes that branch's past only,
        and becomes the newest."""
        conv = self.conv
        tip, book = self.other  # type: ignore[misc]
        head = conv.graph.get_state(conv.config).config["configurable"]["checkpoint_id"]
        config = {"configurable": {"thread_id": conv.thread_id, "checkpoint_id": tip}}
        conv.graph.invoke(
            {"messages": [HumanMessage(_text(assignments))]}, config, durability=durability
        )
        book.turn(assignments)
        self.other = (head, conv.notebook)
        conv.notebook, conv.end_ids = book, []

    @precondition(lambda self: isinstance(getattr(self, "saver", None), _OrderedResumes))
    @rule(
        key=st.sampled_from(KEYS),
        answers=st.tuples(st.sampled_from(["Y", "N"]), st.sampled_from(["Y", "N"])),
        first=st.sampled_from([0, 1]),
        after_its_end=st.booleans(),
        durability=st.sampled_from(["async", "sync", "exit"]),
    )
    def two_resumes_of_one_interrupt(
        self,
        key: str,
        answers: tuple[str, str],
        first: int,
        after_its_end: bool,
        durability: str,
    ) -> None:
        """One interrupt answered twice at once (an approval submitted twice): both runs read
        the paused checkpoint, then store their results there in the order drawn (the second
        right after the first's result, or after the first run ended). Another answer than
        one already stored there is refused (``ConcurrentResume``) and leaves nothing behind;
        equal answers both go on, and so do runs under ``durability="exit"`` that store
        nothing on the paused checkpoint. Each branch left reads its own notebook, and none
        reads a refused answer. (Only on the library's own savers: the stock ones do not
        check.)"""
        conv, saver = self.conv, self.saver
        run_sync(conv.say(f"gate {key}=0"))  # the run pauses on the tool's question
        book = conv.notebook
        paused = conv.graph.get_state(conv.config).config["configurable"]["checkpoint_id"]
        config = {"configurable": {"thread_id": conv.thread_id, "checkpoint_id": paused}}
        saver.plan = plan = _Plan(paused, first, after_its_end)
        tips: dict[int, str] = {}
        refused: dict[int, ConcurrentResume] = {}

        def run(name: int) -> None:
            _RUN.set(name)
            try:
                for event in conv.graph.stream(
                    Command(resume=answers[name]),
                    config,
                    stream_mode="checkpoints",
                    durability=durability,
                ):
                    tips[name] = event["config"]["configurable"]["checkpoint_id"]
            except ConcurrentResume as error:
                refused[name] = error
            finally:
                if name == first:
                    plan.first_done.set()

        threads = [
            threading.Thread(target=contextvars.copy_context().run, args=(run, name))
            for name in (0, 1)
        ]
        try:
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(timeout=120)
                assert not thread.is_alive(), "a resume never ended"
        finally:
            saver.plan = None
        assert all(error.checkpoint_id == paused for error in refused.values())
        stored = sorted(set(tips) - set(refused))
        if answers[0] == answers[1]:
            assert not refused, "an equal answer was refused"
        else:
            note_event(f"two answers ({durability}): {len(stored)} stored")
            if durability != "exit":  # both results go on the paused checkpoint: one is kept
                assert len(stored) <= 1, "two runs with different answers were both stored"
        head = conv.graph.get_state(conv.config).config["configurable"]["checkpoint_id"]
        if not stored:  # the question is still open: answer it once, as a person would
            assert head == paused, "a refused run left a checkpoint behind"
            run_sync(conv.resume())
            return
        books = {name: _copy(book) for name in stored}
        for name in stored:
            books[name].turn([(key, answers[name])])
        current = next(name for name in stored if tips[name] == head)
        conv.notebook, book.pending = books[current], []
        conv.end_ids = [*conv.end_ids, head]
        others = [name for name in stored if name != current]
        if others:
            self.other = (tips[others[0]], books[others[0]])

    @precondition(lambda self: self.turns > 1)
    @rule(data=st.data())
    def prune(self, data: st.DataObject) -> None:
        keep = data.draw(st.integers(1, self.turns), label="keep turns")
        result = run_sync(prune_thread(self.saver, self.conv.thread_id, keep_turns=keep))
        book = self.conv.notebook
        book.retained_from = max(book.retained_from, result.retained_turns[0])
        if self.other is not None:
            tip, other = self.other
            index = run_sync(
                CheckpointHistory(self.saver, checkpoint_id=tip).turns(self.conv.thread_id)
            )
            other.retained_from = max(other.retained_from, index.retained.start)

    @invariant()
    def every_branch_reads_its_own_notebook(self) -> None:
        if not hasattr(self, "conv"):
            return
        run_sync(self.conv.check())
        if self.other is not None:
            tip, book = self.other
            run_sync(self.conv.check(checkpoint_id=tip, notebook=book))


def _text(assignments: list[tuple[str, str]]) -> str:
    return "put " + " ".join(f"{k}={v}" for k, v in assignments) if assignments else "chat"


def _copy(book: Notebook) -> Notebook:
    return Notebook(
        ends=[dict(end) for end in book.ends],
        current=dict(book.current),
        retained_from=book.retained_from,
    )


TestInterleavedOnMemory = InterleavedMachine.TestCase
TestInterleavedOnMemory.settings = _random(150, 8)


class InterleavedSqliteMachine(InterleavedMachine):
    path: str = ""
    open_saver = SqliteMachine.open_saver
    reopen = SqliteMachine.reopen


def test_interleaved_runs_on_sqlite_fixed_seeds(tmp_path: Any) -> None:
    InterleavedSqliteMachine.path = str(tmp_path / "interleaved.sqlite")
    _run_derandomized(InterleavedSqliteMachine, 30)


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


class InterleavedPostgresMachine(InterleavedMachine):
    open_saver = PostgresMachine.open_saver
    reopen = PostgresMachine.reopen


@pytest.mark.postgres
@pytest.mark.parametrize("machine", [PostgresMachine, InterleavedPostgresMachine])
def test_postgres_fixed_seeds(machine: type[RuleBasedStateMachine]) -> None:
    import psycopg

    try:
        psycopg.connect(PG_DSN, connect_timeout=3).close()
    except psycopg.OperationalError as error:
        postgres_unavailable(error)
    _run_derandomized(machine, 20)  # type: ignore[arg-type]
