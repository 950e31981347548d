"""The checkpoint walk: fork-correct, equal to the ring, equal after reload, on every backend."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.checkpoint.base import BaseCheckpointSaver

from mcp_state_versions.agent.build import run_turn
from mcp_state_versions.backends import stamp_turn
from mcp_state_versions.demo.run import GAZETTEER
from mcp_state_versions.retention.prune import prune_thread
from mcp_state_versions.savers.memory import PruningInMemorySaver
from mcp_state_versions.walk.checkpoints import CheckpointHistory, _from_head
from mcp_state_versions.walk.history import Found, KeyNotSetYet, NeverHappened, NotRetained

from ..conftest import open_backend
from ..helpers import BBOX, agent_on, answers, fork_at, plain

CPH, AAR, OSLO = (GAZETTEER[p]["bbox"] for p in ("copenhagen", "aarhus", "oslo"))


async def seed_then_fork(agent: Any, thread_id: str) -> None:
    """Copenhagen, chat, Aarhus; then back to the end of turn 1 and Oslo from there."""
    for text in ["find Copenhagen", "what country?", "find Aarhus"]:
        await run_turn(agent, thread_id, text)
    await fork_at(agent, thread_id, 1, "find Oslo")


async def test_fork_never_leaks_the_abandoned_branch(saver: Any, thread_id: str) -> None:
    agent = agent_on(saver, ring_size=0)
    await seed_then_fork(agent, thread_id)
    history = CheckpointHistory(saver)
    assert (await history.turns(thread_id)).total == 2
    got = await answers(agent, thread_id, history)
    assert [plain(a) for a in got] == [("Found", CPH), ("Found", OSLO)]
    assert got[0].source == "history"
    for turn in (1, 2):
        snapshot = await history.tool_state_at(thread_id, turn)
        assert snapshot.tool_state is not None
        assert snapshot.tool_state[BBOX]["value"] != AAR
    assert (await history.tool_state_at(thread_id, 3)).tool_state is None


async def test_unstamped_runs_and_generic_savers_walk_the_same(thread_id: str) -> None:
    """Runs started without run_turn carry no turn stamp; a saver without a lineage scan is
    walked link by link. Both must give the stamped fast path's answers."""

    class PlainSaver(BaseCheckpointSaver):
        def __init__(self) -> None:
            super().__init__()
            self.inner = PruningInMemorySaver()

        async def aget_tuple(self, config):  # type: ignore[no-untyped-def]
            return await self.inner.aget_tuple(config)

        def alist(self, config, **kwargs):  # type: ignore[no-untyped-def]
            return self.inner.alist(config, **kwargs)

        async def aput(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            return await self.inner.aput(*args, **kwargs)

        async def aput_writes(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            return await self.inner.aput_writes(*args, **kwargs)

        def get_next_version(self, current, channel):  # type: ignore[no-untyped-def]
            return self.inner.get_next_version(current, channel)

    plain_saver = PlainSaver()
    agent = agent_on(plain_saver, ring_size=0)
    for text in ["find Copenhagen", "what?", "find Aarhus", "find Oslo"]:
        await agent.ainvoke(
            {"messages": [("user", text)]}, {"configurable": {"thread_id": thread_id}}
        )
    got = await answers(agent, thread_id, CheckpointHistory(plain_saver))
    assert [plain(a) for a in got] == [
        ("Found", CPH),
        ("Found", CPH),
        ("Found", AAR),
        ("Found", OSLO),
    ]


async def test_a_wrong_stamp_is_caught_by_the_messages(thread_id: str) -> None:
    saver = PruningInMemorySaver()
    agent = agent_on(saver, ring_size=0)
    config = {"configurable": {"thread_id": thread_id}}
    for text, stamp in [("find Copenhagen", 1), ("find Aarhus", 7), ("find Oslo", 3)]:
        await agent.ainvoke(
            {"messages": [("user", text)]},
            {**config, "metadata": {"mcp_state_versions_turn": stamp}},
        )
    got = await answers(agent, thread_id, CheckpointHistory(saver))
    assert [plain(a) for a in got] == [("Found", CPH), ("Found", AAR), ("Found", OSLO)]


async def test_reload_equals_live(tmp_path: Any, thread_id: str) -> None:
    for kind in ("sqlite", "postgres"):
        async with await open_backend(kind, tmp_path) as saver:
            agent = agent_on(saver, ring_size=1)
            await seed_then_fork(agent, thread_id)
            await run_turn(agent, thread_id, "find Aarhus")
            await run_turn(agent, thread_id, "find Copenhagen")
            live = {
                key: await answers(agent, thread_id, CheckpointHistory(saver), key)
                for key in ("gazet/get_aoi/bbox", "gazet/get_aoi/name", "gazet/get_aoi/country")
            }
        async with await open_backend(kind, tmp_path) as reopened:
            agent = agent_on(reopened, ring_size=1)
            again = {
                key: await answers(agent, thread_id, CheckpointHistory(reopened), key)
                for key in live
            }
        assert again == live
        assert [plain(a) for a in live[BBOX]] == [
            ("Found", CPH),
            ("Found", OSLO),
            ("Found", AAR),
            ("Found", CPH),
        ]


async def test_never_happened_and_pruned_are_distinct(saver: Any, thread_id: str) -> None:
    agent = agent_on(saver, ring_size=0)
    for text in ["what?", "find Copenhagen", "find Aarhus", "find Oslo", "thanks"]:
        await run_turn(agent, thread_id, text)
    history = CheckpointHistory(saver)
    before = await answers(agent, thread_id, history)
    assert isinstance(before[0], KeyNotSetYet)
    assert [plain(a) for a in before[1:]] == [
        ("Found", CPH),
        ("Found", AAR),
        ("Found", OSLO),
        ("Found", OSLO),
    ]
    result = await prune_thread(saver, thread_id, keep_turns=2)
    assert result.retained_turns == range(4, 6) and result.total_turns == 5 and result.deleted > 0
    after = await answers(agent, thread_id, history)
    for answer in after[:3]:
        assert isinstance(answer, NotRetained) and answer.retained == range(4, 6)
    assert [plain(a) for a in after[3:]] == [("Found", OSLO), ("Found", OSLO)]
    state = (await agent.aget_state({"configurable": {"thread_id": thread_id}})).values
    from mcp_state_versions.walk.resolve import resolve_turn

    beyond = await resolve_turn(
        state["tool_state"], BBOX, 6, current_turn=5, history=history, thread_id=thread_id
    )
    assert isinstance(beyond, NeverHappened) and beyond.total == 5
    # The thread goes on after pruning.
    await run_turn(agent, thread_id, "find Aarhus")
    assert plain((await answers(agent, thread_id, history))[-1]) == ("Found", AAR)


async def test_a_ring_held_version_survives_pruning(saver: Any, thread_id: str) -> None:
    agent = agent_on(saver)
    for text in ["find Copenhagen", "find Aarhus", "find Oslo"]:
        await run_turn(agent, thread_id, text)
    await prune_thread(saver, thread_id, keep_turns=1)
    got = await answers(agent, thread_id, CheckpointHistory(saver))
    assert [plain(a) for a in got] == [("Found", CPH), ("Found", AAR), ("Found", OSLO)]
    assert all(isinstance(a, Found) and a.source == "ring" for a in got)


# -- ring, walk and reference agree on random conversations --------------------------------------

steps = st.lists(
    st.one_of(
        st.tuples(st.just("find"), st.sampled_from(["Copenhagen", "Aarhus", "Oslo"])),
        st.tuples(st.just("chat"), st.just("")),
        st.tuples(st.just("fork"), st.integers(0, 5)),
    ),
    min_size=1,
    max_size=6,
)


async def converse(plan: list[tuple[str, Any]], runs: list[tuple[Any, str]]) -> list[Any]:
    """Play ``plan`` on each (agent, thread); return the reference turn-end bbox values."""
    reference: list[Any] = []  # bbox at the end of each turn of the current branch
    for action, argument in plan:
        if action == "fork" and len(reference) >= 2:
            back = argument % (len(reference) - 1) + 1
            reference = reference[:back]
            for agent, thread in runs:
                await fork_at(agent, thread, back, "find Oslo")
            reference.append(OSLO)
            continue
        text = f"find {argument}" if action == "find" else "chat"
        for agent, thread in runs:
            await run_turn(agent, thread, text)
        previous = reference[-1] if reference else None
        reference.append(GAZETTEER[argument.lower()]["bbox"] if action == "find" else previous)
    return reference


async def check_agreement(plan: list[tuple[str, Any]], ring: tuple, walk: tuple) -> None:
    """Ring-8 and ring-0 deployments of the same conversation give the reference's answers."""
    (ring_saver, ring_thread), (walk_saver, walk_thread) = ring, walk
    runs = [(agent_on(ring_saver), ring_thread), (agent_on(walk_saver, ring_size=0), walk_thread)]
    reference = await converse(plan, runs)
    if all(value is None for value in reference):
        expected = [("UnknownKey", None)] * len(reference)
    else:
        expected = [("KeyNotSetYet", None) if v is None else ("Found", v) for v in reference]
    for (agent, thread), saver in zip(runs, (ring_saver, walk_saver), strict=True):
        assert [
            plain(a) for a in await answers(agent, thread, CheckpointHistory(saver))
        ] == expected


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps)
async def test_ring_walk_and_reference_agree_in_memory(plan: list[tuple[str, Any]]) -> None:
    await check_agreement(plan, (PruningInMemorySaver(), "t"), (PruningInMemorySaver(), "t"))


FIXED_PLANS = [
    [("find", "Copenhagen"), ("chat", ""), ("find", "Aarhus"), ("fork", 0), ("find", "Aarhus")],
    [("chat", ""), ("find", "Oslo"), ("find", "Oslo"), ("fork", 1), ("chat", ""), ("fork", 3)],
]


async def test_ring_walk_and_reference_agree_on_every_backend(saver: Any, thread_id: str) -> None:
    for index, plan in enumerate(FIXED_PLANS):
        # Two threads of one saver stand in for the two deployments.
        name = f"{thread_id}-{index}"
        await check_agreement(plan, (saver, f"{name}-ring"), (saver, f"{name}-walk"))


class CountingSaver(PruningInMemorySaver):
    """Counts full checkpoint loads (the expensive part of a walk)."""

    loads = 0

    async def aget_tuple(self, config):  # type: ignore[no-untyped-def]
        CountingSaver.loads += 1
        return await super().aget_tuple(config)


async def test_the_walk_loads_a_logarithmic_number_of_checkpoints() -> None:
    saver = CountingSaver()
    agent = agent_on(saver, ring_size=0)
    stamped, plain_thread = "stamped", "plain"
    for index in range(40):
        text = f"find {['Copenhagen', 'Aarhus', 'Oslo'][index % 3]}"
        await run_turn(agent, stamped, text)
        await agent.ainvoke(
            {"messages": [("user", text)]}, {"configurable": {"thread_id": plain_thread}}
        )
    history = CheckpointHistory(saver)
    checkpoints = len(await history.branch_checkpoint_ids(plain_thread))
    assert checkpoints >= 150
    for thread, budget in ((stamped, 3), (plain_thread, 2 * checkpoints.bit_length() + 4)):
        CountingSaver.loads = 0
        snapshot = await history.tool_state_at(thread, 1)
        assert snapshot.tool_state[BBOX]["value"] == CPH
        assert CountingSaver.loads <= budget, (thread, CountingSaver.loads)


async def test_stamps_that_name_no_turn_or_the_wrong_one_change_no_answer(
    saver: Any, thread_id: str
) -> None:
    """Turn stamps are run metadata, which callers write: text, booleans, fractions, objects
    and wrong turns (the last one on the head) are steered around, on every backend."""
    agent = agent_on(saver, ring_size=0)
    config = {"configurable": {"thread_id": thread_id}}
    plan = [
        ("find Copenhagen", "one"),
        ("find Aarhus", True),
        ("find Oslo", 2.5),
        ("find Copenhagen", {"turn": 4}),
        ("find Aarhus", "2"),
        ("find Oslo", 99),
    ]
    for text, stamp in plan:
        await agent.ainvoke(
            {"messages": [("user", text)]},
            {**config, "metadata": {"mcp_state_versions_turn": stamp}},
        )
    history = CheckpointHistory(saver)
    assert (await history.turns(thread_id)).total == len(plan)
    got = await answers(agent, thread_id, history)
    assert [plain(a) for a in got] == [
        ("Found", CPH),
        ("Found", AAR),
        ("Found", OSLO),
        ("Found", CPH),
        ("Found", AAR),
        ("Found", OSLO),
    ]


async def test_an_ended_turn_s_state_is_the_one_the_counted_read_gives(
    saver: Any, thread_id: str
) -> None:
    """``ended_tool_state`` skips counting the thread's turns (a rebuild of the head): where it
    answers, the answer is ``tool_state_at``'s, and it answers every retained turn that has a
    newer checkpoint after it, through wrong stamps, an edit between turns, a fork and a
    prune; it never answers a turn that never happened or is not retained."""
    agent = agent_on(saver, ring_size=0)
    config = {"configurable": {"thread_id": thread_id}}
    for text, stamp in [("find Copenhagen", 1), ("chat", 7), ("find Aarhus", "x"), ("chat", 3)]:
        await agent.ainvoke(
            {"messages": [("user", text)]},
            {**config, "metadata": {"mcp_state_versions_turn": stamp}},
        )
    await agent.aupdate_state(config, {"tool_state": {"ops/edit/note": {"value": "edited"}}})
    for text in ["find Oslo", "chat", "find Copenhagen"]:
        await run_turn(agent, thread_id, text)
    await fork_at(agent, thread_id, 5, "find Aarhus")
    await run_turn(agent, thread_id, "chat")
    history = CheckpointHistory(saver)

    async def compare() -> list[int]:
        total = (await history.turns(thread_id)).total
        answered = []
        for turn in range(0, total + 3):
            ended = await history.ended_tool_state(thread_id, turn)
            counted = await history.tool_state_at(thread_id, turn)
            if ended is not None:
                assert ended == counted.tool_state, turn
                answered.append(turn)
        return answered

    assert await compare() == [1, 2, 3, 4, 5, 6]  # turn 7 ends at the head: counted only
    await prune_thread(saver, thread_id, keep_turns=3)
    assert await compare() == [5, 6]


def test_the_chain_is_the_rows_when_unforked_and_follows_parents_otherwise() -> None:
    linear = [("c3", "c2", 2, "loop"), ("c2", "c1", 1, "loop"), ("c1", None, 1, "input")]
    assert _from_head(linear) is linear  # taken as it is, no row rebuilt
    assert _from_head(list(reversed(linear))) == linear  # oldest first
    assert _from_head([linear[1], linear[0], linear[2]]) == linear  # any order is still correct
    # c2 was forked from c1 as c4; c3 (on the abandoned branch) is not on the chain.
    forked = [("c4", "c1", 2, "fork"), *linear]
    assert [row[0] for row in _from_head(forked)] == ["c4", "c1"]
    # A pruned chain ends where its oldest remaining parent is gone.
    assert [row[0] for row in _from_head(linear[:2])] == ["c3", "c2"]
    assert _from_head([]) == []


def test_stamp_turn_reads_ints_and_their_text_only() -> None:
    assert [stamp_turn(s) for s in (3, "3", "042", 0)] == [3, 3, 42, 0]
    rejected = (None, True, False, 2.5, "2.5", "-1", "", "x", "１", "1" * 10, {"turn": 1}, [1])
    assert [stamp_turn(s) for s in rejected] == [None] * len(rejected)


async def test_a_run_reads_its_own_branch_when_another_branch_is_newer(
    saver: Any, thread_id: str
) -> None:
    """Two runs at once on one thread: while a run continues the head, a fork from the end of
    turn 1 saves checkpoints newer than the run's. A tool of that run (its config names the
    checkpoint its step started from) reads turn 2 from its own branch (Aarhus), never the
    fork's (Oslo); a reader outside any run reads the thread's newest branch."""
    from mcp_state_versions import history_for_run

    agent = agent_on(saver, ring_size=0)
    for text in ["find Copenhagen", "find Aarhus", "what country?"]:
        await run_turn(agent, thread_id, text)
    head = (await agent.aget_state({"configurable": {"thread_id": thread_id}})).config
    await fork_at(agent, thread_id, 1, "find Oslo")  # the thread's newest checkpoints now
    task = {
        "__pregel_checkpointer": saver,
        "thread_id": thread_id,
        "checkpoint_ns": "tools:1",
        "checkpoint_map": {"": head["configurable"]["checkpoint_id"]},
    }
    run_history = history_for_run({"configurable": task})
    assert run_history is not None
    assert (await run_history.turns(thread_id)).total == 3
    snapshot = await run_history.tool_state_at(thread_id, 2)
    assert snapshot.tool_state is not None and snapshot.tool_state[BBOX]["value"] == AAR
    newest = await CheckpointHistory(saver).tool_state_at(thread_id, 2)
    assert newest.tool_state is not None and newest.tool_state[BBOX]["value"] == OSLO
    at = CheckpointHistory(saver, checkpoint_id=head["configurable"]["checkpoint_id"])
    present = await at.present(thread_id)
    assert present is not None and present.turn == 3


async def test_a_run_whose_checkpoint_is_not_stored_yet_waits_for_it(
    saver: Any, thread_id: str
) -> None:
    """A step's checkpoint is saved in the background while the step runs; a read that
    names one not stored yet reads it once it is, and one never stored (``durability=
    "exit"``) reads the branch up to the newest checkpoint stored before it."""
    import asyncio

    from langgraph.checkpoint.base.id import uuid6

    from mcp_state_versions import history_for_run

    agent = agent_on(saver, ring_size=0)
    for text in ["find Copenhagen", "find Aarhus"]:
        await run_turn(agent, thread_id, text)
    unsaved = str(uuid6())
    task = {"__pregel_checkpointer": saver, "checkpoint_ns": "tools:1"}
    history = history_for_run({"configurable": {**task, "checkpoint_map": {"": unsaved}}})
    assert history is not None
    started = asyncio.get_running_loop().time()
    snapshot = await history.tool_state_at(thread_id, 1)
    assert snapshot.tool_state is not None and snapshot.tool_state[BBOX]["value"] == CPH
    assert asyncio.get_running_loop().time() - started < 3


async def test_a_thread_without_a_snapshot_is_rebuilt_from_its_first_checkpoint(
    saver: Any, thread_id: str, monkeypatch: Any
) -> None:
    """Before its first snapshot a thread's chain holds no value anywhere: the walk starts from
    the thread's first checkpoint (which holds nothing) and the writes stored since, read in
    one, and never falls back to the saver's own delta history. Every turn, and a checkpoint
    before anything was written, read as they ended."""
    agent = agent_on(saver, ring_size=0)
    for text in ["find Copenhagen", "what country?", "find Aarhus"]:
        await run_turn(agent, thread_id, text)
    history = CheckpointHistory(saver)

    async def refused(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the saver's delta history was read")

    monkeypatch.setattr(type(history.backend), "rebuild", refused)
    got = await answers(agent, thread_id, history)
    assert [plain(a) for a in got] == [("Found", CPH), ("Found", CPH), ("Found", AAR)]
    chain = await history._chain(thread_id)
    assert await chain.tool_state(len(chain.links) - 1) is None  # the first: never written
    assert await chain.tool_state(len(chain.links) - 2) is None  # nothing written yet


async def test_a_read_reads_each_checkpoint_s_writes_once(saver: Any, thread_id: str) -> None:
    """The probes of one read beyond the ring (the head's state, the end of the turn asked, the
    next turn's to confirm it) share what they read: no checkpoint's writes are asked for
    twice, and the turn's newer neighbours come with its own stretch, so a read costs one query
    of writes, not one a probe (two, with 0 links read ahead)."""
    from mcp_state_versions.walk.resolve import resolve_turn

    agent = agent_on(saver, ring_size=0, snapshot_frequency=45)  # a snapshot every 15 turns
    places = ["Copenhagen", "Aarhus", "Oslo"]
    for turn in range(40):
        await run_turn(agent, thread_id, f"find {places[turn % 3]}")
    state = (await agent.aget_state({"configurable": {"thread_id": thread_id}})).values
    history = CheckpointHistory(saver)
    asked: list[list[str]] = []
    writes_of = history.backend.writes_of

    async def recording(thread: str, namespace: str, checkpoint_ids: Any) -> Any:
        asked.append(list(checkpoint_ids))
        return await writes_of(thread, namespace, checkpoint_ids)

    history.backend.writes_of = recording  # type: ignore[method-assign]
    for turn, place in ((5, AAR), (13, CPH), (27, OSLO)):
        asked.clear()
        found = await resolve_turn(
            state["tool_state"], BBOX, turn, current_turn=40, history=history, thread_id=thread_id
        )
        assert found.source == "history" and found.value == place, found
        every = [checkpoint_id for ids in asked for checkpoint_id in ids]
        assert len(every) == len(set(every)), asked
        assert len(asked) == 1, [len(ids) for ids in asked]  # the turn's, its neighbours' with it


@pytest.mark.postgres
async def test_postgres_looks_up_writes_planned_for_the_checkpoints_asked(thread_id: str) -> None:
    """A prepared statement is soon planned for any parameters, and for "these checkpoints of
    this thread" that plan scans all of the thread's writes. The walk's lookups of writes (and
    a prune's deletes) are planned for the ids they are given, so they are never prepared; the
    lineage query, which has no list, may be. One connection, so its prepared statements are
    all of the library's."""
    from mcp_state_versions.savers.postgres import open_postgres_saver

    from ..conftest import PG_DSN, _check_postgres

    await _check_postgres()
    async with open_postgres_saver(PG_DSN, max_size=1) as saver:
        agent = agent_on(saver, ring_size=0)
        for text in ["find Copenhagen", "what country?", "find Aarhus", "find Oslo"]:
            await run_turn(agent, thread_id, text)
        history = CheckpointHistory(saver)
        for _ in range(6):  # past PostgreSQL's five custom plans before a generic one
            got = await answers(agent, thread_id, history)
        assert plain(got[0]) == ("Found", CPH)
        await prune_thread(saver, thread_id, keep_turns=2)
        async with saver._cursor() as cursor:
            await cursor.execute("SELECT statement FROM pg_prepared_statements", prepare=False)
            prepared = [row["statement"] for row in await cursor.fetchall()]

    def as_prepared(sql: str) -> str:  # psycopg's %s placeholders, as the server keeps them
        parts = sql.split("%s")
        marks = [f"${n}" for n in range(1, len(parts))] + [""]
        return "".join(part + mark for part, mark in zip(parts, marks, strict=True))

    from mcp_state_versions.backends.postgres import _DELETES, _WRITES_SQL, _lineage_sql

    assert as_prepared(_lineage_sql()) in prepared  # statements are prepared on this connection
    for planned_each_time in (_WRITES_SQL, *_DELETES):
        assert as_prepared(planned_each_time) not in prepared


def _asking(messages: Any) -> Any:
    """'find <place>' as :func:`respond`; 'ask <turn>' calls inspect_state for BBOX at that
    turn; a tool result ends the turn with its text."""
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    from mcp_state_versions.demo.scripted import call

    from ..helpers import respond

    last = messages[-1]
    if isinstance(last, HumanMessage) and str(last.content).startswith("ask "):
        turn = int(str(last.content)[4:])
        return AIMessage(
            "", tool_calls=[call("inspect_state", f"c{len(messages)}", key=BBOX, turn=turn)]
        )
    if isinstance(last, ToolMessage) and last.name == "inspect_state":
        return AIMessage(str(last.content))
    return respond(messages)


@pytest.mark.parametrize("durability", ["exit", "async", "sync"])
async def test_a_run_continuing_an_older_branch_reads_that_branch_in_every_durability_mode(
    saver: Any, thread_id: str, durability: str
) -> None:
    """Main runs turns 1-3 (Copenhagen, Aarhus, Oslo); a fork from the end of turn 1 finds
    Oslo and is the thread's newest checkpoint. A run continuing main's head asks for turn 2:
    the answer is main's Aarhus in every durability mode, never the fork's value. An exit-mode
    run stores no checkpoint while it runs, so its reads must not wait for one either."""
    import asyncio

    from mcp_state_versions.agent.build import build_agent
    from mcp_state_versions.demo.run import get_aoi
    from mcp_state_versions.demo.scripted import ScriptedChatModel

    from ..helpers import end_of_turn_checkpoint

    agent = build_agent(
        ScriptedChatModel(respond=_asking), [get_aoi], checkpointer=saver, ring_size=0
    )
    for place in ["Copenhagen", "Aarhus", "Oslo"]:
        await run_turn(agent, thread_id, f"find {place}")
    main_head = await end_of_turn_checkpoint(agent, thread_id, 3)
    await fork_at(agent, thread_id, 1, "find Oslo")
    started = asyncio.get_running_loop().time()
    final = await agent.ainvoke(
        {"messages": [{"role": "user", "content": "ask 2"}]},
        {"configurable": {"thread_id": thread_id, "checkpoint_id": main_head}},
        durability=durability,
    )
    took = asyncio.get_running_loop().time() - started
    answer = str(final["messages"][-1].content)
    assert str(AAR) in answer and str(OSLO) not in answer, answer
    assert took < 0.9, took  # a second's wait for a checkpoint never stored is a defect


def test_checkpoint_history_offers_every_shortcut_the_resolver_takes() -> None:
    """The resolver takes a shortcut where ``isinstance`` finds its protocol: a rename of one
    of these methods would quietly turn it off, so the walk's history is held to all three."""
    from langgraph.checkpoint.memory import InMemorySaver

    from mcp_state_versions.walk.history import (
        HasEndedToolState,
        HasTurnStates,
        HasVersionEnd,
        ThreadHistory,
    )

    history = CheckpointHistory(InMemorySaver())
    for protocol in (ThreadHistory, HasEndedToolState, HasVersionEnd, HasTurnStates):
        assert isinstance(history, protocol), protocol.__name__
