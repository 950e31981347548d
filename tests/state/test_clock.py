"""The turn clock where real agents rewrite their messages, edit state, fork, pause and nest.

Each scenario runs through a real graph on each backend, twice (a ring of 8, and no ring so
every older read walks checkpoints), and every ``turn=`` read of every key is compared with
what a careful person wrote down at each turn's end (:class:`tests.conversation.Notebook`),
live and again through a freshly opened saver on the same storage.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any, TypedDict
from uuid import uuid4

import pytest
from langchain_core.messages import HumanMessage, ToolMessage
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages

from mcp_state_versions import (
    CLOCK_KEY,
    close_turn,
    count_turns,
    current_turn,
    make_inspect_state,
    merge_tool_state,
    open_turn,
    prune_thread,
)

from ..conftest import BACKENDS, open_backend
from ..conversation import (
    PUT,
    Conversation,
    agent_graph,
    host_graph,
    subgraph_host,
    summarize,
    trim_to,
)

Scenario = Callable[[Conversation], Awaitable[None]]


class Plain(TypedDict):
    """A host's state before this library: tool_state as a plain dict channel."""

    messages: Annotated[list, add_messages]
    tool_state: dict


async def trimming(conv: Conversation) -> None:
    for turn in range(1, 9):
        await conv.say(f"put k=v{turn}" if turn % 2 else "chat")


async def summarization(conv: Conversation) -> None:
    for turn in range(1, 8):
        await conv.say(f"put k=v{turn} j=w{turn // 3}" if turn != 4 else "chat")


async def edits(conv: Conversation) -> None:
    await conv.say("put k=a")
    await conv.say("chat")
    await conv.edit("k", "EDIT")  # between turns: after turn 2 ended
    await conv.say("chat")
    await conv.say("raw k=INSIDE j=ALSO")  # unstamped writes inside turn 4
    await conv.say("gate k=b")  # paused inside turn 5, then resumed
    await conv.resume()
    await conv.edit("j", "LATE")
    await conv.say("put j=c")


async def fork_after_trim(conv: Conversation) -> None:
    for turn in range(1, 6):
        await conv.say(f"put k=v{turn}")
    await conv.fork(2, "put k=fork j=x")
    await conv.say("chat")


async def interrupt_and_resume(conv: Conversation) -> None:
    await conv.say("put k=a")
    await conv.say("gate k=b j=b")
    await conv.resume()
    await conv.say("gate k=c")
    await conv.resume()


async def parallel_calls(conv: Conversation) -> None:
    await conv.say("put k=x")
    await conv.say("put k=x1 k=x2 k=x3")
    await conv.say("chat")
    await conv.say("put k=y1 j=1 k=y2")


async def prune_between(conv: Conversation) -> None:
    for turn in range(1, 7):
        await conv.say(f"put k=v{turn}" if turn != 3 else "chat")
    result = await prune_thread(conv.saver, conv.thread_id, keep_turns=2)
    conv.notebook.retained_from = result.retained_turns[0]
    await conv.say("put j=after")


async def persistent_subgraph_fork(conv: Conversation) -> None:
    """A persistent subgraph sharing tool_state: after the parent forks from turn 1, the
    subgraph's own newest state is the abandoned branch's; the fork's must win."""
    for value in ("1", "2", "3"):
        await conv.say(f"put k={value}")
    await conv.fork(1, "put j=F")
    # Forked again from turn 1: the subgraph's own newest state is now at the new fork's
    # turn, opened by the abandoned fork's message; the new branch must not read its values.
    await conv.fork(1, "chat")
    await conv.say("put k=last")


async def edits_in_place(conv: Conversation) -> None:
    """The operator's natural edit: get_state, change a value, write the whole back."""
    await conv.say("put k=a j=b")
    await conv.say("chat")
    await conv.edit_in_place("k", "EDIT")
    await conv.say("put j=c")
    await conv.edit_in_place("j", "J2")
    await conv.edit_in_place("k", "EDIT2")
    await conv.say("chat")


async def overwrites(conv: Conversation, *, plain: bool) -> None:
    """After a summarization, an Overwrite of the keys to keep, as readers see them."""
    for text in ("put k=v1 j=g1", "put k=v2", "chat", "put k=v4", "put k=v5 j=g5"):
        await conv.say(text)
    await conv.overwrite(["k", "j"], plain=plain)
    await conv.say("put k=v6")
    await conv.say("chat")
    await conv.overwrite(["k", "j"], plain=plain)
    await conv.say("put j=v8")


async def drop_and_republish(conv: Conversation, *, plain: bool) -> None:
    """An Overwrite that drops a key, which a later turn publishes again: the turns before
    the drop still read what they ended with (not "not set yet")."""
    await conv.say("put k=1 j=1")
    await conv.say("chat")
    await conv.overwrite(["k"], plain=plain)
    await conv.say("put j=3")
    await conv.say("chat")
    await conv.overwrite(["j"], plain=plain)  # k dropped, then written again in the turn
    await conv.say("put k=6")


SCENARIOS: dict[str, tuple[Scenario, Callable[..., Any]]] = {
    "trimming": (trimming, lambda s, r: host_graph(s, ring_size=r, compact=trim_to(3))),
    "summarization": (summarization, lambda s, r: host_graph(s, ring_size=r, compact=summarize)),
    "edits": (edits, agent_graph),
    "edits-host": (edits, lambda s, r: host_graph(s, ring_size=r)),
    "fork-after-trim": (
        fork_after_trim,
        lambda s, r: host_graph(s, ring_size=r, compact=trim_to(2)),
    ),
    "interrupt": (interrupt_and_resume, agent_graph),
    "parallel": (parallel_calls, agent_graph),
    "subgraph": (parallel_calls, subgraph_host),
    "subgraph-edits": (edits, subgraph_host),
    "prune": (prune_between, agent_graph),
    "edits-in-place": (edits_in_place, agent_graph),
    "persistent-subgraph-fork": (
        persistent_subgraph_fork,
        lambda s, r: subgraph_host(s, r, persistent=True),
    ),
    "overwrite": (
        lambda conv: overwrites(conv, plain=False),
        lambda s, r: host_graph(s, ring_size=r, compact=summarize),
    ),
    "overwrite-plain": (lambda conv: overwrites(conv, plain=True), agent_graph),
    "drop-republish": (lambda conv: drop_and_republish(conv, plain=False), agent_graph),
    "drop-republish-plain": (lambda conv: drop_and_republish(conv, plain=True), agent_graph),
}


@pytest.mark.parametrize("ring_size", [8, 0])
@pytest.mark.parametrize("scenario", list(SCENARIOS))
@pytest.mark.parametrize("kind", BACKENDS)
async def test_every_turn_read_equals_the_notebook(
    kind: str, scenario: str, ring_size: int, tmp_path: Any
) -> None:
    run, build = SCENARIOS[scenario]
    thread_id = f"clock-{scenario}-{uuid4().hex[:10]}"
    async with await open_backend(kind, tmp_path) as saver:
        conv = Conversation(build(saver, ring_size), saver, thread_id)
        await run(conv)
        checked = await conv.check()
        if ring_size == 0:  # every version but the current one came from the walk
            assert checked["Found:history"] > 0, checked
        await conv.check(ring_only=True)
        if kind == "memory":
            return
        async with await open_backend(kind, tmp_path) as reopened:
            await conv.check(reopened)


def test_the_clock_survives_what_counting_messages_does_not() -> None:
    """Trimmed to 3 human messages over 8 turns, the count stops at 3; the clock does not."""
    import asyncio

    from langgraph.checkpoint.memory import InMemorySaver

    async def run() -> dict[str, Any]:
        saver = InMemorySaver()
        conv = Conversation(host_graph(saver, ring_size=8, compact=trim_to(3)), saver, "t")
        await trimming(conv)
        return (await conv.graph.aget_state(conv.config)).values

    values = asyncio.run(run())
    assert count_turns(values["messages"]) == 3
    assert current_turn(values) == 8
    assert values["tool_state"][PUT + "k"]["since"] == 7


async def test_parallel_calls_say_whose_value_the_key_keeps() -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    saver = InMemorySaver()
    conv = Conversation(agent_graph(saver, ring_size=8), saver, "parallel")
    await conv.say("put k=x")
    state = await conv.say("put k=x1 k=x2 k=x3")
    replies = [m for m in state["messages"] if isinstance(m, ToolMessage)][-3:]
    ids = [m.tool_call_id for m in replies]
    for reply in replies:
        text = str(reply.content)
        assert text.startswith(f"[state updated: {PUT}k — replaces the value it held since turn 1]")
        assert "3 calls to put in this step" in text
    assert "this is the last of them, so state keeps its values" in str(replies[-1].content)
    assert f"this call's only if calls {ids[1]} and {ids[2]} fail." in str(replies[0].content)
    assert f"this call's only if call {ids[2]} fails." in str(replies[1].content)
    tool = make_inspect_state()
    runtime = _runtime(state, "parallel")
    listing = await tool.coroutine(key=PUT + "k", versions=True, runtime=runtime)  # type: ignore[misc]
    assert 'turn 2 on (current), written 3 times in turn 2: "x3"' in listing


async def test_an_edit_between_turns_reads_as_set_after_the_turn() -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    saver = InMemorySaver()
    conv = Conversation(agent_graph(saver, ring_size=8), saver, "edit")
    await conv.say("put k=a")
    await conv.say("chat")
    await conv.edit("k", "EDIT")
    state = (await conv.graph.aget_state(conv.config)).values
    tool = make_inspect_state()
    runtime = _runtime(state, "edit")
    now = await tool.coroutine(key=PUT + "k", runtime=runtime)  # type: ignore[misc]
    assert now.startswith('"EDIT"') and "set after turn 2 ended" in now
    then = await tool.coroutine(key=PUT + "k", turn=2, runtime=runtime)  # type: ignore[misc]
    assert then.endswith('"a"')


def test_the_reducer_accepts_its_own_output() -> None:
    state = merge_tool_state({}, {CLOCK_KEY: {"turn": 1, "open": True, "message": "m1"}})
    state = merge_tool_state(state, {PUT + "k": {"value": "a"}})
    state = merge_tool_state(state, {CLOCK_KEY: {"turn": 1, "open": False, "seen": "x"}})
    state = merge_tool_state(state, {CLOCK_KEY: {"turn": 2, "open": True, "message": "m2"}})
    state = merge_tool_state(state, {PUT + "k": {"value": "b"}})
    assert merge_tool_state(None, state) == state
    assert merge_tool_state({}, state) == state
    assert merge_tool_state(state, state) == state
    older = merge_tool_state({}, {CLOCK_KEY: {"turn": 1, "open": True, "message": "m1"}})
    assert merge_tool_state(older, state) == state


def test_a_single_forged_entry_cannot_invent_an_earlier_turn() -> None:
    state = merge_tool_state({}, {CLOCK_KEY: {"turn": 3, "open": True, "message": "m"}})
    forged = {
        "value": "now",
        "tool": "x",
        "seq": 99,
        "turn": 1,
        "since": 1,
        "versions": 2,
        "ring": [{"turn": 1, "seq": 1, "digest": "d", "value": "invented"}],
        "digest": "e",
        "size": 5,
        "bytes": 5,
    }
    state = merge_tool_state(state, {PUT + "k": forged})
    entry = state[PUT + "k"]
    assert (entry["value"], entry["since"], entry["versions"], entry["ring"]) == ("now", 3, 1, [])


def test_plain_values_are_adopted_not_refused() -> None:
    state = merge_tool_state(
        {"legacy/tool/bbox": [1, 2, 3, 4], "other": "x"},
        {CLOCK_KEY: {"turn": 4, "open": True, "message": "m"}},
    )
    assert state["legacy/tool/bbox"]["value"] == [1, 2, 3, 4]
    assert state["legacy/tool/bbox"]["adopted"] == 4 and state["other"]["since"] == 4
    state = merge_tool_state(state, {"other": {"value": "y"}})
    assert state["other"]["value"] == "y" and state[CLOCK_KEY]["bytes"] == sum(
        e["bytes"] for k, e in state.items() if k != CLOCK_KEY
    )


@pytest.mark.parametrize("kind", BACKENDS)
async def test_a_thread_that_held_plain_values_migrates(kind: str, tmp_path: Any) -> None:
    """A host moving from a plain dict channel: old turns read from history as they were."""

    def plain_turn(state: Plain) -> dict[str, Any]:
        turn = count_turns(state["messages"])
        return {"tool_state": {**(state.get("tool_state") or {}), PUT + "k": f"plain{turn}"}}

    thread_id = f"migrate-{uuid4().hex[:10]}"
    async with await open_backend(kind, tmp_path) as saver:
        old = StateGraph(Plain)
        old.add_node("work", plain_turn)
        old.add_edge(START, "work")
        old_graph = old.compile(checkpointer=saver)
        conv = Conversation(old_graph, saver, thread_id)
        for _ in range(2):
            await conv._invoke({"messages": [HumanMessage("old")]}, conv.config)
        conv.notebook.turn([("k", "plain1")])
        conv.notebook.turn([("k", "plain2")])
        for ring_size in (8,):
            conv.graph = agent_graph(saver, ring_size=ring_size)
            await conv.say("chat")
            await conv.say("put k=new")
            await conv.check()
            await conv.check(ring_only=True)


def _runtime(state: Any, thread_id: str) -> Any:
    from ..conftest import runtime_for

    return runtime_for(state, thread_id)


def test_open_turn_counts_only_new_user_messages() -> None:
    from langchain_core.messages import AIMessage

    state: dict[str, Any] = {"messages": [HumanMessage("hi", id="h1")], "tool_state": {}}

    def apply(update: dict[str, Any]) -> None:
        if update:
            state["tool_state"] = merge_tool_state(state["tool_state"], update["tool_state"])

    apply(open_turn(state))
    assert state["tool_state"][CLOCK_KEY]["turn"] == 1
    assert open_turn(state) == {}  # the same message again: no tick (a resume, a re-run)
    state["messages"].append(AIMessage("ok", id="a1"))
    apply(close_turn(state))
    assert state["tool_state"][CLOCK_KEY]["open"] is False
    # Summarization replaced the list: a summary (a human message) and the last reply.
    state["messages"] = [HumanMessage("summary", id="s"), AIMessage("ok", id="a1")]
    assert open_turn(state) == {}  # a run with no new user message does not tick
    state["messages"].append(HumanMessage("next", id="h2"))
    apply(open_turn(state))
    assert state["tool_state"][CLOCK_KEY]["turn"] == 2


def test_the_clock_recognizes_ids_recorded_before_marks() -> None:
    """The clock records message marks; a record written before them holds the ids themselves,
    and a thread continued from one neither counts its last turn again nor misses a new one."""
    from langchain_core.messages import AIMessage

    from mcp_state_versions.state.clock import message_mark

    old = {"turn": 3, "open": False, "message": "h3", "seen": "a3", "counted": ["h2", "h3"]}
    tool_state = merge_tool_state({}, {CLOCK_KEY: {**old, "seq": 0, "bytes": 0}})
    messages: list[Any] = [HumanMessage("q", id="h3"), AIMessage("a", id="a3")]
    assert open_turn({"messages": messages, "tool_state": tool_state}) == {}
    wiped = [HumanMessage("q", id="h2"), AIMessage("a", id="a2")]  # trimmed back to turn 2
    assert open_turn({"messages": wiped, "tool_state": tool_state}) == {}
    messages.append(HumanMessage("next", id="h4"))
    tick = open_turn({"messages": messages, "tool_state": tool_state})["tool_state"][CLOCK_KEY]
    assert tick == {"turn": 4, "open": True, "message": message_mark("h4")}
    assert len(tick["message"]) == 12 and message_mark("h4") != message_mark("h5")


def test_a_model_node_ticks_and_closes_the_turn_itself() -> None:
    """ticks_around: what build_agent's model node writes instead of two clock nodes."""
    from langchain_core.messages import AIMessage

    from mcp_state_versions.state.clock import message_mark as mark
    from mcp_state_versions.state.clock import ticks_around

    state: dict[str, Any] = {"messages": [HumanMessage("hi", id="h1")], "tool_state": {}}
    calling = AIMessage("", id="a1", tool_calls=[{"name": "t", "args": {}, "id": "c1"}])
    update = ticks_around(state, calling, bounds={"ring_size": 0, "ring_bytes": 1, "budget": 9})
    assert update["tool_state"][CLOCK_KEY] == {
        "turn": 1,
        "open": True,
        "message": mark("h1"),
        "ring_size": 0,
        "ring_bytes": 1,
        "budget": 9,
    }
    state["tool_state"] = merge_tool_state({}, update["tool_state"])
    state["messages"].append(calling)
    final = AIMessage("done", id="a2")
    assert ticks_around(state, final)["tool_state"][CLOCK_KEY] == {
        "turn": 1,
        "open": False,
        "seen": mark("a2"),
    }
    # a new user message answered without tools: opened and closed in one write
    state["messages"] += [final, HumanMessage("again", id="h2")]
    tick = ticks_around(state, AIMessage("sure", id="a3"))["tool_state"][CLOCK_KEY]
    assert tick == {"turn": 2, "open": False, "message": mark("h2"), "seen": mark("a3")}
    # inside a subgraph the turn is the root graph's to close
    inner = {"configurable": {"checkpoint_ns": "outer:1|agent:2"}}
    assert ticks_around(state, AIMessage("x", id="a4"), inner)["tool_state"][CLOCK_KEY]["open"]


def test_a_tick_that_skips_turns_is_refused_and_positions_are_exact() -> None:
    """The clock moves one turn at a time; positions compare exactly at any turn."""
    from mcp_state_versions.state.clock import end_of_turn, position, turn_at
    from mcp_state_versions.state.reducer import ToolStateError

    state = merge_tool_state({}, {CLOCK_KEY: {"turn": 3, "open": True}})
    assert merge_tool_state(state, {CLOCK_KEY: {"turn": 4, "open": True}})[CLOCK_KEY]["turn"] == 4
    for jump in (5, 10**6, 2**62):
        with pytest.raises(ToolStateError, match="moves one turn at a time"):
            merge_tool_state(state, {CLOCK_KEY: {"turn": jump, "open": True}})
    # a whole state may catch up (a persistent subgraph's input), and an earlier turn is ignored
    later = merge_tool_state({}, {CLOCK_KEY: {"turn": 9, "open": True}})
    assert merge_tool_state(state, later)[CLOCK_KEY]["turn"] == 9
    assert merge_tool_state(state, {CLOCK_KEY: {"turn": 1, "open": True}})[CLOCK_KEY]["turn"] == 3
    big = 2**62
    ended = {"tool_state": {CLOCK_KEY: {"turn": big, "open": False}}}
    running = {"tool_state": {CLOCK_KEY: {"turn": big + 1, "open": True}}}
    assert position(ended) == end_of_turn(big) < position(running)
    assert turn_at(position(ended)) == big and isinstance(position(ended), int)


@pytest.mark.parametrize("kind", BACKENDS)
async def test_update_state_cannot_jump_the_clock_and_a_prune_keeps_the_head(
    kind: str, tmp_path: Any
) -> None:
    """An operator's ``update_state`` that would move the clock to turn 10**6 is refused, and
    however many turns a prune keeps, it never deletes the head (even of a thread whose clock
    did jump, by a whole state)."""
    from mcp_state_versions.state.reducer import ToolStateError
    from mcp_state_versions.walk.checkpoints import CheckpointHistory

    async with await open_backend(kind, tmp_path) as saver:
        conv = Conversation(agent_graph(saver, 0), saver, f"jump-{uuid4().hex[:12]}")
        for turn in range(1, 4):
            await conv.say(f"put k=v{turn}")
        with pytest.raises(ToolStateError, match="moves one turn at a time"):
            await conv.graph.aupdate_state(
                conv.config, {"tool_state": {CLOCK_KEY: {"turn": 10**6, "open": True}}}
            )
        assert (await CheckpointHistory(saver).turns(conv.thread_id)).total == 3
        state = (await conv.graph.aget_state(conv.config)).values["tool_state"]
        jumped = {**state, CLOCK_KEY: {**state[CLOCK_KEY], "turn": 2**62, "open": False}}
        await conv.graph.aupdate_state(conv.config, {"tool_state": jumped}, as_node="tools")
        head = (await conv.graph.aget_state(conv.config)).config["configurable"]["checkpoint_id"]
        for keep in (3, 2, 1):
            await prune_thread(saver, conv.thread_id, keep_turns=keep)
            ids = await CheckpointHistory(saver).branch_checkpoint_ids(conv.thread_id)
            assert ids and ids[0] == head
        index = await CheckpointHistory(saver).turns(conv.thread_id)
        assert index.total == 2**62 and index.retained[-1] == 2**62


async def test_when_the_last_parallel_call_fails_an_earlier_reply_stays_true() -> None:
    """The last of three parallel calls fails: the second call's value is the one kept, and
    no reply claimed otherwise."""
    from langchain_core.messages import AIMessage

    from mcp_state_versions import build_agent
    from mcp_state_versions.demo.scripted import ScriptedChatModel, call

    from ..conversation import put

    script = [
        AIMessage(
            "",
            tool_calls=[
                call("put", "c1", key="k", value="x1"),
                call("put", "c2", key="k", value="x2"),
                call("put", "c3", key="k"),  # no value: the call fails
            ],
        ),
        AIMessage("done"),
    ]
    agent = build_agent(ScriptedChatModel(replies=script), [put])
    state = await agent.ainvoke({"messages": [HumanMessage("put them")]})
    replies = {
        m.tool_call_id: str(m.content) for m in state["messages"] if isinstance(m, ToolMessage)
    }
    assert state["tool_state"][PUT + "k"]["value"] == "x2"
    assert "this call's only if call c3 fails" in replies["c2"]
    assert "this call's only if calls c2 and c3 fail" in replies["c1"]
    assert "error" in replies["c3"].lower()


@pytest.mark.parametrize("kind", BACKENDS)
async def test_a_run_without_a_new_user_message_after_a_wipe_does_not_tick(
    kind: str, tmp_path: Any
) -> None:
    """The messages are wiped down to the first user message (what a trim keeps), then a
    run starts with no new user message: the newest user message was counted turns ago, and
    the clock stays where it was."""
    from langchain_core.messages import RemoveMessage

    async with await open_backend(kind, tmp_path) as saver:
        conv = Conversation(agent_graph(saver, 0), saver, f"wiped-{uuid4().hex[:12]}")
        for turn in range(1, 4):
            await conv.say(f"put k=v{turn}")
        messages = (await conv.graph.aget_state(conv.config)).values["messages"]
        wipe = [RemoveMessage(id=m.id) for m in messages[1:]]
        await conv.graph.aupdate_state(conv.config, {"messages": wipe}, as_node="tools")
        await conv.graph.ainvoke({"messages": []}, conv.config)
        values = (await conv.graph.aget_state(conv.config)).values
        assert current_turn(values) == 3
        await conv.say("put k=v4")  # a new user message still opens the next turn
        assert current_turn((await conv.graph.aget_state(conv.config)).values) == 4


def test_values_of_is_the_plain_view_without_the_clock() -> None:
    from mcp_state_versions import values_of

    state = merge_tool_state({}, {CLOCK_KEY: {"turn": 1, "open": True, "message": "m"}})
    state = merge_tool_state(state, {PUT + "a": {"value": [1]}, PUT + "b": {"value": "x"}})
    assert values_of({"tool_state": state, "messages": []}) == {PUT + "a": [1], PUT + "b": "x"}
    assert values_of(state) == values_of({"tool_state": state})
    evicted = {**state, PUT + "b": {k: v for k, v in state[PUT + "b"].items() if k != "value"}}
    assert values_of(evicted) == {PUT + "a": [1]}
    assert values_of({}) == {} and values_of(None) == {}


async def test_a_key_an_overwrite_dropped_reads_as_of_its_turns_and_says_it_was_dropped() -> None:
    """Dropped by an Overwrite: the present no longer holds the key, but a turn that ended
    with it still answers its value (never "no key"), saying the key is gone now; written
    again, the turns before the drop read what they ended with, not "not set yet"."""
    from langgraph.checkpoint.memory import InMemorySaver

    from mcp_state_versions.walk.checkpoints import CheckpointHistory

    saver = InMemorySaver()
    conv = Conversation(agent_graph(saver, ring_size=8), saver, "dropped")
    await conv.say("put k=1 j=1")
    await conv.say("chat")
    await conv.overwrite(["k"])
    state = (await conv.graph.aget_state(conv.config)).values
    tool = make_inspect_state(history=CheckpointHistory(saver))
    runtime = _runtime(state, "dropped")
    then = await tool.coroutine(key=PUT + "j", turn=1, runtime=runtime)  # type: ignore[misc]
    assert "dropped the key from state" in then and then.endswith('"1"'), then
    now = await tool.coroutine(key=PUT + "j", runtime=runtime)  # type: ignore[misc]
    assert now.startswith(f"No key {PUT + 'j'!r} in session state"), now  # nothing stands in
    await conv.say("put j=3")
    state = (await conv.graph.aget_state(conv.config)).values
    runtime = _runtime(state, "dropped")
    for turn, value in [(1, "1"), (2, "1"), (3, "3")]:
        read = await tool.coroutine(key=PUT + "j", turn=turn, runtime=runtime)  # type: ignore[misc]
        assert read.endswith(f'"{value}"'), (turn, read)
