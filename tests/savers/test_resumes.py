"""One interrupt resumed by two runs at once (``mcp_state_versions.savers.resumes``): a run
whose result was not stored is refused with ``ConcurrentResume`` (under ``durability="exit"``,
where a run's writes cross the other's, both may be), and never stores a branch that would read
the other run's answer; equal answers both go on. Two processes on SQLite and
PostgreSQL, two runs in one process on memory, in each durability mode."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest
from langchain_core.messages import HumanMessage
from langgraph.types import Command

from mcp_state_versions import CheckpointHistory, ConcurrentResume, PruningInMemorySaver, entries_of

from ..conftest import BACKENDS, PG_DSN, open_backend
from ..conversation import PUT, agent_graph
from ..helpers import ASKED, asking_agent, resume_answer, two_asks_agent

DURABILITIES = ["async", "sync", "exit"]


async def _branch_values(saver: Any, thread_id: str) -> list[Any]:
    """What each run's last checkpoint reads back, from a reader that never ran the thread:
    one value per branch ended after the pause."""
    agent = asking_agent(saver)
    config = {"configurable": {"thread_id": thread_id}}
    values = []
    async for snapshot in agent.aget_state_history(config):
        if not snapshot.next and snapshot.metadata.get("step", 0) > 1:
            entry = entries_of(snapshot.values.get("tool_state")).get(ASKED)
            values.append(entry and entry["value"])
    return values


def _resume_in_processes(
    where: str, thread_id: str, answers: list[str], barrier: Path, durability: str
) -> list[str]:
    command = [sys.executable, "-m", "tests.workers", "resume", where, thread_id]
    workers = [
        subprocess.Popen(
            [*command, answer, str(barrier), durability], stdout=subprocess.PIPE, text=True
        )
        for answer in answers
    ]
    outputs = [worker.communicate(timeout=300)[0].strip() for worker in workers]
    assert all(worker.returncode == 0 for worker in workers), outputs
    return outputs


@pytest.mark.parametrize(
    ("answers", "durability"),
    [(["X", "Y"], "async"), (["X", "Y"], "sync"), (["X", "Y"], "exit"), (["X", "X"], "async")],
    ids=["differ-async", "differ-sync", "differ-exit", "equal"],
)
@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def test_two_processes_resuming_one_interrupt(
    kind: str, answers: list[str], durability: str, tmp_path: Path
) -> None:
    thread_id = f"resume-{uuid4().hex}"
    where = str(tmp_path / "t.sqlite") if kind == "sqlite" else PG_DSN
    async with await open_backend(kind, tmp_path) as saver:
        agent = asking_agent(saver)
        config = {"configurable": {"thread_id": thread_id}}
        await agent.ainvoke({"messages": [HumanMessage("ask me")]}, config)
        assert (await agent.aget_state(config)).next == ("tools",)  # paused
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    outputs = _resume_in_processes(where, thread_id, answers, barrier, durability)
    stored = [output.removeprefix("stored ") for output in outputs if output.startswith("stored ")]
    refused = [output for output in outputs if output.startswith("refused ")]
    if answers[0] == answers[1]:
        assert stored == answers and not refused
    else:  # one is refused; both may be (their writes crossed), never neither
        assert len(stored) <= 1 and len(refused) == 2 - len(stored), outputs
        assert thread_id in refused[0] and "another run stored its result" in refused[0]
    async with await open_backend(kind, tmp_path) as reader:
        assert sorted(await _branch_values(reader, thread_id)) == sorted(stored)
        present = await CheckpointHistory(reader).present(thread_id)
        assert present is not None
        head = present.tool_state.get(ASKED)
        assert (head and head["value"]) == (stored[-1] if stored else None)


@pytest.mark.parametrize("durability", DURABILITIES)
async def test_two_runs_in_one_process_resuming_one_interrupt(durability: str) -> None:
    """On the in-memory saver, two runs of one process at once, in each durability mode."""
    saver = PruningInMemorySaver()
    thread_id = f"resume-{uuid4().hex}"
    agent = asking_agent(saver)
    config = {"configurable": {"thread_id": thread_id}}
    await agent.ainvoke({"messages": [HumanMessage("ask me")]}, config)
    results = await asyncio.gather(
        resume_answer(agent, thread_id, "X", durability=durability),
        resume_answer(agent, thread_id, "Y", durability=durability),
        return_exceptions=True,
    )
    refused = [result for result in results if isinstance(result, ConcurrentResume)]
    stored = [entries_of(r["tool_state"])[ASKED]["value"] for r in results if isinstance(r, dict)]
    assert len(stored) <= 1 and len(refused) == 2 - len(stored), results
    assert await _branch_values(saver, thread_id) == stored


@pytest.mark.parametrize("kind", BACKENDS)
async def test_two_exit_mode_runs_continuing_one_checkpoint(kind: str, tmp_path: Path) -> None:
    """Under ``durability="exit"`` a run stores its writes on the checkpoint it continues, at
    its end. Two runs continuing one head at once (two savers: two processes' connections)
    must never leave a branch that reads the other's turn: a run either keeps its own
    branch, or is refused and leaves nothing behind."""
    thread_id = f"exit-{uuid4().hex}"
    config = {"configurable": {"thread_id": thread_id}}
    async with (
        await open_backend(kind, tmp_path) as here,
        await open_backend(kind, tmp_path) as there,
    ):
        savers = (here, here) if kind == "memory" else (here, there)
        ours, theirs = (agent_graph(saver, 8) for saver in savers)
        await ours.ainvoke({"messages": [HumanMessage("put k=0")]}, config)
        results = await asyncio.gather(
            ours.ainvoke({"messages": [HumanMessage("put k=A")]}, config, durability="exit"),
            theirs.ainvoke({"messages": [HumanMessage("put k=B")]}, config, durability="exit"),
            return_exceptions=True,
        )
        assert all(isinstance(r, dict | ConcurrentResume) for r in results), results
        kept = {
            entries_of(r["tool_state"])[PUT + "k"]["value"] for r in results if isinstance(r, dict)
        }
        async with await open_backend(kind, tmp_path) as reader:
            graph = agent_graph(here if kind == "memory" else reader, 8)
            ends = []
            async for snapshot in graph.aget_state_history(config):
                if not snapshot.next:
                    humans = [m.content for m in snapshot.values["messages"] if m.type == "human"]
                    value = entries_of(snapshot.values["tool_state"])[PUT + "k"]["value"]
                    ends.append((value, humans))
        assert sorted(ends) == sorted(
            [("0", ["put k=0"])] + [(v, ["put k=0", f"put k={v}"]) for v in kept]
        )


@pytest.mark.parametrize("durability", DURABILITIES)
@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def test_a_resume_another_process_stored_is_read_by_the_process_that_paused(
    kind: str, durability: str, tmp_path: Path
) -> None:
    """This process pauses a turn on two parallel calls that each wait for a person; another
    OS process resumes one, this one the other. This process then reads and runs the thread
    with both answers, as a fresh process does: what it remembers of the paused checkpoint is
    not all it holds (the other process wrote there too)."""
    from ..helpers import two_asks_agent

    thread_id = f"xproc-{uuid4().hex}"
    where = str(tmp_path / "t.sqlite") if kind == "sqlite" else PG_DSN
    config = {"configurable": {"thread_id": thread_id}}
    both = {PUT + "a": "1", PUT + "b": "2"}
    async with await open_backend(kind, tmp_path) as saver:
        agent = two_asks_agent(saver)
        await agent.ainvoke({"messages": [HumanMessage("hello")]}, config)
        await agent.ainvoke({"messages": [HumanMessage("ask both")]}, config)
        command = [sys.executable, "-m", "tests.workers", "resume-one", where, thread_id, "b", "2"]
        other = subprocess.run(command, capture_output=True, text=True, timeout=300)
        assert other.stdout.strip() == "resumed", other.stderr
        pending = [i for t in (await agent.aget_state(config)).tasks for i in t.interrupts]
        assert len(pending) == 1 and "a?" in str(pending[0].value)
        await agent.ainvoke(Command(resume={pending[0].id: "1"}), config, durability=durability)
        stored = (await agent.aget_state(config)).values
        assert {k: e["value"] for k, e in entries_of(stored["tool_state"]).items()} == both
        assert [m.type for m in stored["messages"]][-4:] == ["ai", "tool", "tool", "ai"]
        after = await agent.ainvoke({"messages": [HumanMessage("more")]}, config)
        assert {k: e["value"] for k, e in entries_of(after["tool_state"]).items()} == both
        ours = [(m.type, m.content) for m in after["messages"]]
    async with await open_backend(kind, tmp_path) as fresh:
        theirs = (await two_asks_agent(fresh).aget_state(config)).values["messages"]
        assert [(m.type, m.content) for m in theirs] == ours


def _values(state: Any) -> tuple[dict[str, Any], list[tuple[str, Any]]]:
    tool_state = {k: e["value"] for k, e in entries_of(state.get("tool_state")).items()}
    return tool_state, [(m.type, m.content) for m in state["messages"]]


@pytest.mark.parametrize(
    "answers",
    [("1", "2", "1", "2"), ("1", "2", "1", "9"), ("1", "2", "8", "9")],
    ids=["equal", "one-differs", "both-differ"],
)
@pytest.mark.parametrize("kind", BACKENDS)
async def test_two_runs_resuming_two_interrupted_calls_at_once(
    kind: str, answers: tuple[str, ...], tmp_path: Path
) -> None:
    """Two calls of one step each wait for a person; two runs answer both at once (one
    approval submitted twice, from two connections). No write of a run that goes on is ever
    taken back: each such run's branch reads back what it returned. A refused run leaves a
    thread that goes on as its error says, and then reads back as it ran."""
    thread_id = f"two-{uuid4().hex}"
    config = {"configurable": {"thread_id": thread_id}}
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    async with (
        await open_backend(kind, tmp_path) as here,
        await open_backend(kind, tmp_path) as there,
    ):
        savers = (here, here) if kind == "memory" else (here, there)
        first, second = (two_asks_agent(saver, str(barrier)) for saver in savers)
        await first.ainvoke({"messages": [HumanMessage("ask both")]}, config)
        waiting = {
            str(i.value): i.id for t in (await first.aget_state(config)).tasks for i in t.interrupts
        }
        a, b = waiting["the value of a?"], waiting["the value of b?"]
        results = await asyncio.gather(
            first.ainvoke(Command(resume={a: answers[0], b: answers[1]}), config),
            second.ainvoke(Command(resume={a: answers[2], b: answers[3]}), config),
            return_exceptions=True,
        )
        assert all(isinstance(r, dict | ConcurrentResume) for r in results), results
        went_on = [_values(r) for r in results if isinstance(r, dict)]
        if answers[:2] == answers[2:]:
            assert len(went_on) == 2  # one answer submitted twice: both go on
        ends = [
            _values(s.values)
            async for s in two_asks_agent(here).aget_state_history(config)
            if not s.next and s.values.get("tool_state")
        ]
        for ran in went_on:
            assert ran in ends, (ran, ends)
            given = [{PUT + "a": x, PUT + "b": y} for x, y in (answers[:2], answers[2:])]
            assert ran[0] in given  # one run's answers, never a mix
        if not went_on:  # every run refused: the thread goes on as the error says
            agent = two_asks_agent(here)
            state = await agent.aget_state(config)
            pending = {i.id: "0" for t in state.tasks for i in t.interrupts}
            live = await agent.ainvoke(Command(resume=pending) if pending else None, config)
            assert not (await agent.aget_state(config)).next
            assert _values((await agent.aget_state(config)).values) == _values(live)
            assert len(entries_of(live["tool_state"])) == 2
