"""Turn stamps settled as checkpoints are stored (``mcp_state_versions.savers.stamps``): a
``run_turn`` continuing a stamped run reads nothing before its run, its checkpoints carry the
turns their clocks show, and where the checkpoint it continues carries none (another process's
run, an unstamped run) it is stored unstamped, never with a wrong turn or the placeholder."""

from __future__ import annotations

from typing import Any
from uuid import uuid4

import pytest
from langchain_core.messages import AIMessage

import mcp_state_versions.agent.build as agent_module
from mcp_state_versions import CheckpointHistory, build_agent, run_turn
from mcp_state_versions.backends import stamp_turn
from mcp_state_versions.demo.run import GAZETTEER, get_aoi
from mcp_state_versions.demo.scripted import ScriptedChatModel
from mcp_state_versions.savers.stamps import NEXT_TURN
from mcp_state_versions.state.clock import turn_at

from ..conftest import BACKENDS, open_backend
from ..helpers import BBOX, agent_on, answers, inside_a_parent, plain

SQL_BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
PLACES = ["Copenhagen", "Aarhus", "Oslo"]


async def stamps(saver: Any, thread_id: str, namespace: str = "") -> list[Any]:
    """Each checkpoint's stored stamp on the thread's branch, oldest first, after checking
    each against its checkpoint's clock: a run stamped N starts from the end of turn N - 1
    (its first checkpoints hold it, until the model node opens turn N) and ends in turn N."""
    history = CheckpointHistory(saver, namespace=namespace)
    chain = await history._chain(thread_id)
    found: list[Any] = []
    for index in range(len(chain.links) - 1, -1, -1):
        link = await chain._backend.stamp(thread_id, namespace, chain.links[index])
        chain.links[index] = link
        assert link[2] != NEXT_TURN, "the placeholder reached storage"
        stamp = stamp_turn(link[2])
        if stamp is not None:
            clock = turn_at(await chain.position(index, trust_stamps=False))
            assert clock in (stamp - 1, stamp), (index, link, clock)
            if index == 0 or stamp_turn(chain.links[index - 1][2]) != stamp:  # a run's last
                assert clock == stamp, (index, link, clock)
        found.append(stamp)
    return found


class CountingReads:
    """Counts the head reads ``run_turn`` makes before a run."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.reads = 0
        real = agent_module._stamped_turn

        async def counted(*args: Any, **kwargs: Any) -> Any:
            self.reads += 1
            return await real(*args, **kwargs)

        monkeypatch.setattr(agent_module, "_stamped_turn", counted)


@pytest.mark.parametrize("kind", SQL_BACKENDS)
async def test_a_run_is_stamped_as_it_is_stored(
    kind: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    counting = CountingReads(monkeypatch)
    async with await open_backend(kind, tmp_path) as saver:
        agent = agent_on(saver, ring_size=0)
        thread_id = f"stamps-{uuid4().hex}"
        for place in PLACES:
            await run_turn(agent, thread_id, f"find {place}")
        # A run that stores only its last checkpoint, a few steps after the one it continues.
        await run_turn(agent, thread_id, "find Copenhagen", __pregel_durability="exit")
        for place in PLACES[1:]:
            await run_turn(agent, thread_id, f"find {place}")
        assert counting.reads == 1  # the first turn only: nothing seen of the thread before
        found = await stamps(saver, thread_id)
        assert set(found) == {1, 2, 3, 4, 5, 6} and found == sorted(found)
        assert found.count(4) == 1  # the run stored at its exit
        assert [plain(a) for a in await answers(agent, thread_id, CheckpointHistory(saver))] == [
            ("Found", GAZETTEER[place.lower()]["bbox"]) for place in PLACES * 2
        ]


@pytest.mark.parametrize("kind", SQL_BACKENDS)
async def test_a_run_continuing_another_process_s_checkpoint(
    kind: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two savers on one database stand for two processes. A run continuing the other one's
    stamped run takes the turn after it (not the one after what this process saw last); one
    continuing its unstamped run is stored unstamped, and the next ``run_turn`` reads the
    head and stamps again. The answers are right throughout."""
    counting = CountingReads(monkeypatch)
    thread_id = f"stamps-{uuid4().hex}"
    config = {"configurable": {"thread_id": thread_id}}
    async with (
        await open_backend(kind, tmp_path) as here,
        await open_backend(kind, tmp_path) as there,
    ):
        ours, theirs = agent_on(here, ring_size=0), agent_on(there, ring_size=0)
        await run_turn(ours, thread_id, "find Copenhagen")  # turn 1: read first
        await run_turn(ours, thread_id, "find Aarhus")  # turn 2: settled at put
        await run_turn(theirs, thread_id, "find Oslo")  # turn 3, in the other process
        await run_turn(ours, thread_id, "find Copenhagen")  # turn 4: after theirs, not 3
        await theirs.ainvoke({"messages": [("user", "find Aarhus")]}, config)  # turn 5
        await run_turn(ours, thread_id, "find Oslo")  # turn 6: continues an unstamped run
        await run_turn(ours, thread_id, "find Copenhagen")  # turn 7: reads, and stamps
        assert counting.reads == 3  # ours: turn 1 and 7; theirs: turn 3 (its first)
        found = await stamps(here, thread_id)
        runs = [stamp for i, stamp in enumerate(found) if i == 0 or stamp != found[i - 1]]
        assert runs == [1, 2, 3, 4, None, 7], found
        want = [PLACES[i % 3] for i in range(7)]
        got = await answers(ours, thread_id, CheckpointHistory(here))
        assert [plain(a) for a in got] == [
            ("Found", GAZETTEER[place.lower()]["bbox"]) for place in want
        ]


def _script() -> list[AIMessage]:
    from mcp_state_versions.demo.scripted import call

    return [
        reply
        for place in PLACES
        for reply in (
            AIMessage("", tool_calls=[call("get_aoi", f"c-{place}", place=place)]),
            AIMessage("ok"),
        )
    ]


@pytest.mark.parametrize("kind", SQL_BACKENDS)
async def test_a_persistent_subgraph_s_checkpoints_take_the_root_s_turn(
    kind: str, tmp_path: Any
) -> None:
    inner = build_agent(ScriptedChatModel(replies=_script()), [get_aoi], ring_size=0)
    async with await open_backend(kind, tmp_path) as saver:
        graph = inside_a_parent(inner, saver)
        thread_id = f"stamps-{uuid4().hex}"
        for place in PLACES:
            await run_turn(graph, thread_id, f"find {place}")
        assert {s for s in await stamps(saver, thread_id) if s is not None} == {1, 2, 3}
        inside = await stamps(saver, thread_id, namespace="agent")
        assert set(inside) == {1, 2, 3} and inside == sorted(inside)
        history = CheckpointHistory(saver, namespace="agent")
        snapshot = await history.tool_state_at(thread_id, 2)
        assert snapshot.tool_state is not None
        assert snapshot.tool_state[BBOX]["value"] == [9.9, 56.1, 10.3, 56.2]


def test_settling_by_the_parent_s_stamp_and_step() -> None:
    """``settle`` on its own: the run's first checkpoint takes the turn after a stamped loop
    parent, a later one its parent's, a run stored at its exit the turn after; a parent it
    does not know, or one that gave way to newer ones, leaves the run unstamped, and the
    placeholder never stays."""
    from mcp_state_versions.savers.stamps import SEEN_PER_THREAD, note_stamp, settle
    from mcp_state_versions.state.reducer import TURN_METADATA_KEY as KEY

    class Saver:
        pass

    saver = Saver()
    note_stamp(saver, "t", "", "c1", {KEY: 3, "source": "loop", "step": 7})

    def settled(parent: str | None, source: str, step: int) -> Any:
        config = {
            "configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": parent},
            "metadata": {KEY: NEXT_TURN, "other": 1},
        }
        given, metadata = settle(saver, config, {"source": source, "step": step})
        assert given["metadata"] == {"other": 1}  # the placeholder out, the rest kept
        return metadata.get(KEY)

    assert settled("c1", "input", 8) == 4
    note_stamp(saver, "t", "", "c2", {KEY: 4, "source": "input", "step": 8})
    assert settled("c2", "loop", 9) == 4  # the step after its parent: the same run
    assert settled("c1", "loop", 12) == 4  # stored at its exit, steps after its parent
    assert settled(None, "input", -1) == 1  # a new thread
    assert settled("unknown", "input", 8) is None
    for index in range(SEEN_PER_THREAD):
        note_stamp(saver, "t", "", f"n{index}", {KEY: 9, "source": "loop", "step": 20 + index})
    assert settled("c1", "input", 8) is None  # gave way to newer ones
    plain = {"configurable": {"thread_id": "t"}, "metadata": {KEY: 5}}
    assert settle(saver, plain, {"source": "loop"}) == (plain, {"source": "loop", KEY: 5})


@pytest.mark.parametrize("kind", BACKENDS)
async def test_stamps_that_lie_change_no_answer(kind: str, tmp_path: Any) -> None:
    """A stamp is the caller's word. A first run started with another turn's stamp (the public
    ``turn_config(thread, 4)``), and later runs stamped with turns far off, change neither the
    count of turns, nor what is retained, nor any answer."""
    from mcp_state_versions import turn_config

    async with await open_backend(kind, tmp_path) as saver:
        agent = agent_on(saver, ring_size=0)
        thread_id = f"stamps-{uuid4().hex}"
        lies = [4, None, None, 9, 1, None]  # None: run_turn, which stamps from the clock
        for turn, lie in enumerate(lies):
            text = f"find {PLACES[turn % 3]}"
            if lie is None:
                await run_turn(agent, thread_id, text)
            else:
                await agent.ainvoke({"messages": [("user", text)]}, turn_config(thread_id, lie))
        history = CheckpointHistory(saver)
        index = await history.turns(thread_id)
        assert (index.total, index.retained) == (6, range(1, 7))
        assert [plain(a) for a in await answers(agent, thread_id, history)] == [
            ("Found", GAZETTEER[PLACES[turn % 3].lower()]["bbox"]) for turn in range(6)
        ]
