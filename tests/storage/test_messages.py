"""The messages reducer against ``add_messages`` itself: parity, batching, ids, removals."""

from __future__ import annotations

import copy
import functools
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    ToolMessage,
)
from langgraph.graph.message import REMOVE_ALL_MESSAGES, add_messages

from mcp_state_versions.storage.channels import MessagesChannel, messages_channel
from mcp_state_versions.storage.messages import (
    MESSAGE_INDEXES,
    calling_several,
    merge_messages,
    replay_messages,
)

IDS = ["a", "b", "c", "d", "e"]
TEXTS = ["hi", "ok", "done", "x"]


@st.composite
def message_like(draw: Any) -> Any:
    """One message-like in every form ``add_messages`` takes; a few ids, so writes meet."""
    text = draw(st.sampled_from(TEXTS))
    message_id = draw(st.one_of(st.none(), st.sampled_from(IDS)))
    kind = draw(st.integers(0, 6))
    if kind == 0:
        return HumanMessage(text, id=message_id)
    if kind == 1:
        return AIMessage(text, id=message_id)
    if kind == 2:
        return AIMessageChunk(content=text, id=message_id)
    if kind == 3:
        found = {"role": draw(st.sampled_from(["user", "assistant"])), "content": text}
        return found if message_id is None else {**found, "id": message_id}
    if kind == 4:
        return (draw(st.sampled_from(["user", "ai", "system"])), text)
    if kind == 5:
        return text
    return ToolMessage(text, tool_call_id="t1", id=message_id)


@st.composite
def write(draw: Any, *, removals: bool = True) -> Any:
    """A write: one message-like or a list; with removals by id and the remove-all marker."""
    items = draw(
        st.lists(
            st.one_of(
                message_like(),
                st.builds(lambda i: RemoveMessage(id=i), st.sampled_from(IDS))
                if removals
                else message_like(),
                st.just(RemoveMessage(id=REMOVE_ALL_MESSAGES)),
            ),
            max_size=4,
        )
    )
    if len(items) == 1 and draw(st.booleans()):
        return items[0]
    return items


def reference(state: list[Any], writes: list[Any]) -> list[BaseMessage] | None:
    """``add_messages`` over the writes one by one, as LangGraph's stock channel merges them;
    ``None`` where it raises (a removal of an id the list does not hold)."""
    try:
        return functools.reduce(add_messages, copy.deepcopy(writes), copy.deepcopy(state))
    except ValueError:
        return None


def shape(messages: list[BaseMessage], generated: set[str]) -> list[tuple[Any, ...]]:
    """What must agree: each message's type, content and, where it was given one, its id."""
    return [
        (m.type, m.content, None if m.id in generated else m.id, type(m).__name__) for m in messages
    ]


def given_ids(writes: list[Any]) -> set[str]:
    found: set[str] = set()
    for w in writes:
        for m in w if isinstance(w, list) else [w]:
            if isinstance(m, BaseMessage) and m.id:
                found.add(m.id)
            elif isinstance(m, dict) and m.get("id"):
                found.add(m["id"])
    return found


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(writes=st.lists(write(), max_size=6))
def test_parity_with_add_messages(writes: list[Any]) -> None:
    expected = reference([], writes)
    if expected is None:
        with pytest.raises(ValueError, match="doesn't exist"):
            merge_messages([], writes)
        return
    got = merge_messages([], writes)
    ours = {m.id for m in got} - given_ids(writes)
    theirs = {m.id for m in expected} - given_ids(writes)
    assert shape(got, ours) == shape(expected, theirs)
    assert all(isinstance(m, BaseMessage) and m.id for m in got)
    assert not any(isinstance(m, AIMessageChunk) for m in got if m.type == "ai")


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(
    xs=st.lists(write(), max_size=5),
    ys=st.lists(write(), max_size=5),
)
def test_batching_invariant_and_pure(xs: list[Any], ys: list[Any]) -> None:
    before = copy.deepcopy((xs, ys))
    whole = _or_error(replay_messages, [], xs + ys)
    state = _or_error(replay_messages, [], xs)
    assert not isinstance(state, Exception)
    assert replay_messages(state, ys) == whole
    assert (xs, ys) == before  # writes are never changed
    # and batched one write at a time
    one_by_one: list[Any] = []
    for w in xs + ys:
        one_by_one = replay_messages(one_by_one, [w])
    assert one_by_one == whole


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(
    xs=st.lists(write(), max_size=5),
    ys=st.lists(write(), max_size=5),
)
def test_a_remembered_index_merges_as_a_fresh_one(xs: list[Any], ys: list[Any]) -> None:
    # A merge into a list a merge returned copies that list's remembered index; the answer
    # must be the one an index built afresh gives, and the list merged into stays as it was.
    state = _or_error(replay_messages, [], xs)
    assert not isinstance(state, Exception)
    before = list(state)
    remembered = _or_error(merge_messages, state, ys)
    assert state == before
    MESSAGE_INDEXES.clear()
    fresh = _or_error(merge_messages, list(state), ys)
    assert type(remembered) is type(fresh)
    assert remembered == fresh or isinstance(fresh, Exception)


def test_a_list_changed_in_place_is_indexed_afresh() -> None:
    first = [HumanMessage("a", id="a"), AIMessage("b", id="b")]
    grown = merge_messages([], [first])
    grown.append(HumanMessage("c", id="c"))  # longer than when its index was remembered
    edit = AIMessage("c, edited", id="c")
    assert merge_messages(grown, [edit]) == add_messages(list(grown), edit)
    swapped = merge_messages([], [first])
    swapped[-1] = AIMessage("z", id="z")  # its last message is another
    edit = AIMessage("z, edited", id="z")
    assert merge_messages(swapped, [edit]) == add_messages(list(swapped), edit)


def test_remembered_indexes_are_bounded_by_lists_and_by_ids() -> None:
    MESSAGE_INDEXES.clear()
    many_lists = MESSAGE_INDEXES.LIMIT + 44
    lists = [merge_messages([], [[HumanMessage(f"{n}", id=f"{n}")]]) for n in range(many_lists)]
    assert len(MESSAGE_INDEXES._lists) == MESSAGE_INDEXES.LIMIT
    newest = MESSAGE_INDEXES.get(lists[-1])
    assert newest is not None and newest.index == {f"{many_lists - 1}": 0}
    assert MESSAGE_INDEXES.get(lists[0]) is None
    many = [HumanMessage(f"{n}", id=f"{n}") for n in range(MESSAGE_INDEXES.LIMIT_IDS // 2 + 1)]
    older = merge_messages([], [many])
    newer = merge_messages([], [many])  # the same conversation's: the older goes
    held = sum(found.length for found in MESSAGE_INDEXES._lists.values())
    assert held <= MESSAGE_INDEXES.LIMIT_IDS and MESSAGE_INDEXES._held == held
    assert MESSAGE_INDEXES.get(older) is None and MESSAGE_INDEXES.get(newer) is not None
    huge = [HumanMessage(f"h{n}", id=f"h{n}") for n in range(MESSAGE_INDEXES.LIMIT_IDS + 1)]
    merge_messages([], [huge])  # past the bound alone: every other list gives way
    assert len(MESSAGE_INDEXES._lists) == 1


def test_each_conversation_keeps_its_newest_list_and_the_one_its_run_start_replayed_into() -> None:
    """Another conversation's many lists push out this one's older lists first: the list its
    last run start replayed into (which the next run start goes on from) and its newest stay,
    and a merge into either is a lookup."""
    MESSAGE_INDEXES.clear()
    first = HumanMessage("hi", id="a-first")
    replayed = merge_messages([], [[first]])
    MESSAGE_INDEXES.replayed(replayed)
    middle = merge_messages(replayed, [[AIMessage("1", id="a-1")]])
    newest = merge_messages(middle, [[AIMessage("2", id="a-2")]])
    other = merge_messages([], [[HumanMessage("x", id="b-first")]])
    for n in range(2 * MESSAGE_INDEXES.LIMIT):  # one other conversation, growing
        other = merge_messages(other, [[AIMessage(f"{n}", id=f"b-{n}")]])
    assert MESSAGE_INDEXES.get(middle) is None
    assert MESSAGE_INDEXES.get(replayed) is not None and MESSAGE_INDEXES.get(newest) is not None
    before = MESSAGE_INDEXES.rebuilt
    reply = AIMessage("3", id="a-3")
    assert merge_messages(replayed, [[reply]]) == add_messages(list(replayed), reply)
    assert MESSAGE_INDEXES.rebuilt == before


@st.composite
def calling(draw: Any) -> Any:
    """A model's message calling none, one or several tools (a few ids, so one replaces
    another and the count changes), or a write of the other kinds."""
    if draw(st.booleans()):
        return draw(write())
    calls = [
        {"name": "put", "args": {}, "id": f"call-{n}", "type": "tool_call"}
        for n in range(draw(st.integers(0, 3)))
    ]
    return [AIMessage("", tool_calls=calls, id=draw(st.sampled_from(IDS)))]


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(steps=st.lists(st.tuples(st.lists(calling(), max_size=3), st.booleans()), max_size=8))
def test_messages_calling_several_tools_as_a_fresh_look_finds_them(steps: list[Any]) -> None:
    # Merged a batch at a time into the list the last merge returned, some asked after each
    # batch (what was found is remembered with the list, and a merge carries it on), others
    # not: the answer is always the one looking at every message gives.
    MESSAGE_INDEXES.clear()
    state: list[Any] = []
    for writes, ask in steps:
        merged = _or_error(replay_messages, state, writes)
        state = merged if not isinstance(merged, Exception) else state
        if ask:
            copied = list(state)
            MESSAGE_INDEXES.copied(state, copied)  # as a channel's copy, read ahead
            expected = tuple(
                i for i, m in enumerate(state) if len(getattr(m, "tool_calls", None) or ()) > 1
            )
            assert calling_several(state) == expected
            assert calling_several(copied) == expected
            assert calling_several(tuple(state)) == expected  # never merged: looked at whole
            # a copy of the stored list, as create_agent hands its middleware, and another list
            assert calling_several(list(state), state) == expected
            backwards = tuple(sorted(len(state) - 1 - i for i in expected))
            assert calling_several(state[::-1], state) == backwards


def test_a_merged_list_answers_calling_several_without_looking_at_its_messages(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The merge keeps the answer; asked of the merged list, or of a copy holding the very same
    # messages beside it (create_agent's), no message is looked at. Another list is.
    from mcp_state_versions.storage import messages as module

    calls = [{"name": "put", "args": {}, "id": f"call-{n}", "type": "tool_call"} for n in (1, 2)]
    state = merge_messages(
        [], [[HumanMessage("hi", id="h"), AIMessage("", tool_calls=calls, id="a")]]
    )
    state = merge_messages(state, [[ToolMessage("done", tool_call_id="call-1", id="t")]])
    looked: list[Any] = []
    real = module._calls_several
    monkeypatch.setattr(module, "_calls_several", lambda m: looked.append(m) or real(m))
    assert calling_several(state) == (1,)
    assert calling_several(list(state), state) == (1,)
    assert looked == []
    assert calling_several(list(state)) == (1,)  # no entry: looked at whole
    assert len(looked) == len(state)


def _or_error(fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except ValueError as error:
        return error


@settings(max_examples=200, deadline=None)
@given(writes=st.lists(write(removals=False), min_size=1, max_size=6))
def test_ids_of_id_less_messages_are_the_same_on_every_replay(writes: list[Any]) -> None:
    first = merge_messages([], copy.deepcopy(writes))
    again = merge_messages([], copy.deepcopy(writes))
    assert [m.id for m in first] == [m.id for m in again]
    generated = [m.id for m in first if m.id not in given_ids(writes)]
    assert len(set(generated)) == len(generated)  # a derived id is never another's


def test_a_removal_of_an_unknown_id_fails_live_and_is_skipped_in_a_replay() -> None:
    state = merge_messages([], [[HumanMessage("hi", id="1")]])
    with pytest.raises(ValueError, match="'nope'"):
        merge_messages(state, [[RemoveMessage(id="nope")]])
    assert replay_messages(state, [[RemoveMessage(id="nope")]]) == state
    channel = messages_channel().__metadata__[0]
    assert isinstance(channel, MessagesChannel)
    live = channel.from_checkpoint(None)
    live.update([[HumanMessage("hi", id="1")]])
    with pytest.raises(ValueError, match="'nope'"):
        live.update([[RemoveMessage(id="nope")]])
    fresh = channel.from_checkpoint(None)
    fresh.replay_writes(
        [
            ("t", "messages", [HumanMessage("hi", id="1")]),
            ("t", "messages", [RemoveMessage(id="nope")]),
        ]
    )
    assert [m.id for m in fresh.get()] == ["1"]


def test_a_run_start_looks_only_at_the_writes_after_its_remembered_replay(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Writes a remembered replay merged are not asked again whether they are an Overwrite;
    # one stored after them still resets the list, as LangGraph's own replay does.
    from langgraph.types import Overwrite

    from mcp_state_versions.storage import channels
    from mcp_state_versions.storage.tool_state import REPLAYS

    REPLAYS.clear()
    channel = messages_channel().__metadata__[0]
    writes = [(f"t{n}", "messages", [HumanMessage(str(n), id=str(n))]) for n in range(5)]
    channel.from_checkpoint(None).replay_writes(writes)
    asked: list[Any] = []
    real = channels.overwrite_of
    monkeypatch.setattr(channels, "overwrite_of", lambda v: asked.append(v) or real(v))
    later = [*writes, ("t5", "messages", [HumanMessage("5", id="5")])]
    again = channel.from_checkpoint(None)
    again.replay_writes(later)
    assert [m.id for m in again.get()] == [str(n) for n in range(6)]
    assert asked == [later[-1][2]]
    reset = [*later, ("t6", "messages", Overwrite([AIMessage("new", id="n")]))]
    reset.append(("t7", "messages", [HumanMessage("7", id="7")]))
    last = channel.from_checkpoint(None)
    last.replay_writes(reset)
    assert [m.id for m in last.get()] == ["n", "7"]
    assert last.written == 8  # every write since the seed counted (an Overwrite as one)


def test_replace_remove_and_remove_all_as_add_messages() -> None:
    state = merge_messages([], [[HumanMessage("a", id="1"), AIMessage("b", id="2")]])
    edited = merge_messages(state, [[AIMessage("B", id="2")]])  # an HITL edit
    assert [(m.id, m.content) for m in edited] == [("1", "a"), ("2", "B")]
    assert [m.id for m in merge_messages(edited, [RemoveMessage(id="1")])] == ["2"]
    summary = merge_messages(
        edited, [[RemoveMessage(id=REMOVE_ALL_MESSAGES), HumanMessage("summary", id="s")]]
    )
    assert [m.id for m in summary] == ["s"]


def test_snapshots_follow_the_list_s_growth() -> None:
    """An append-only list snapshots at sizes that grow threefold, so snapshots together stay
    within 1.5 times what was written."""
    channel = messages_channel().__metadata__[0].from_checkpoint(None)
    snapshots: list[int] = []
    written = 0
    for step in range(3000):
        channel.update([[HumanMessage(str(step), id=str(step))]])
        written += 1
        if channel.snapshot_frequency == 1:
            snapshots.append(len(channel.get()))
    assert snapshots[:3] == [32, 96, 288]
    assert sum(snapshots) <= 1.5 * written


# -- stored as writes, through real graphs and savers ------------------------------------------


def _plain(messages: list[BaseMessage]) -> list[tuple[Any, ...]]:
    return [(type(m).__name__, m.id, m.content) for m in messages]


async def _fresh_read(kind: str, saver: Any, tmp_path: Any, config: Any) -> list[Any]:
    """The thread's messages as a process that never ran it reads them."""
    from mcp_state_versions.backends.known import forget_histories
    from mcp_state_versions.storage.tool_state import REPLAYS

    from ..conftest import open_backend
    from ..helpers import agent_on

    REPLAYS.clear()
    if kind == "memory":
        forget_histories(saver)
        return _plain((await agent_on(saver).aget_state(config)).values["messages"])
    async with await open_backend(kind, tmp_path) as other:
        return _plain((await agent_on(other).aget_state(config)).values["messages"])


@pytest.mark.parametrize(
    "kind", ["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
async def test_reload_equals_live_through_edits_removals_and_forks(
    kind: str, tmp_path: Any, thread_id: str
) -> None:
    from mcp_state_versions import run_turn

    from ..conftest import open_backend
    from ..helpers import agent_on

    config: Any = {"configurable": {"thread_id": thread_id}}
    async with await open_backend(kind, tmp_path) as saver:
        agent = agent_on(saver)
        assert type(agent.channels["messages"]).__name__ == "MessagesChannel"
        for place in ["Copenhagen", "Aarhus", "Oslo"]:
            await run_turn(agent, thread_id, f"find {place}")
        # a client's tuple and string, which no one gave an id
        await agent.ainvoke({"messages": [("user", "find Oslo")]}, config)
        await agent.ainvoke({"messages": "hello"}, config)
        live = (await agent.aget_state(config)).values["messages"]
        assert all(m.id for m in live)
        assert _plain(live) == await _fresh_read(kind, saver, tmp_path, config)
        # an operator's edit by id, then a removal
        target = live[1]
        await agent.aupdate_state(config, {"messages": [AIMessage("edited", id=target.id)]})
        await agent.aupdate_state(config, {"messages": [RemoveMessage(id=live[0].id)]})
        # an unknown id is refused at the write
        with pytest.raises(ValueError, match="doesn't exist"):
            await agent.aupdate_state(config, {"messages": [RemoveMessage(id="no-such-id")]})
        live = (await agent.aget_state(config)).values["messages"]
        assert live[0].content == "edited" and live[0].id == target.id
        assert _plain(live) == await _fresh_read(kind, saver, tmp_path, config)
        # a fork from the end of turn 1 never sees the other branch's messages
        history = [s async for s in agent.aget_state_history(config)]
        turn_one = next(
            s for s in reversed(history) if s.next == () and len(s.values.get("messages", [])) >= 4
        )
        forked = await agent.ainvoke({"messages": [("user", "find Aarhus")]}, turn_one.config)
        contents = [m.content for m in forked["messages"]]
        assert "find Oslo" not in contents and "hello" not in contents
        assert _plain(forked["messages"]) == await _fresh_read(kind, saver, tmp_path, config)
        # summarization: all removed, written anew
        await agent.aupdate_state(
            config,
            {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), HumanMessage("summary")]},
        )
        await run_turn(agent, thread_id, "find Oslo")
        live = (await agent.aget_state(config)).values["messages"]
        assert live[0].content == "summary"
        assert _plain(live) == await _fresh_read(kind, saver, tmp_path, config)


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def test_a_thread_stores_what_it_added_not_its_square(
    kind: str, tmp_path: Any, thread_id: str
) -> None:
    """Stored bytes grow with the turns (doubling the turns about doubles them), where the
    stock channel's grow with their square; ``messages="whole"`` keeps the stock channel."""
    from mcp_state_versions import run_turn
    from mcp_state_versions.backends import backend_for

    from ..conftest import open_backend
    from ..helpers import agent_on

    async with await open_backend(kind, tmp_path) as saver:
        sizes: dict[str, list[int]] = {}
        for mode in ["delta", "whole"]:
            agent = agent_on(saver, messages=mode)
            thread = f"{thread_id}-{mode}"
            sizes[mode] = []
            for turn in range(1, 61):
                await run_turn(agent, thread, "find Oslo" if turn % 2 else "find Aarhus")
                if turn in (30, 60):
                    sizes[mode].append(await backend_for(saver).stored_bytes(thread, None, None))
        assert sizes["delta"][1] < 2.6 * sizes["delta"][0], sizes
        assert sizes["whole"][1] > 3 * sizes["whole"][0], sizes
        assert sizes["delta"][1] * 4 < sizes["whole"][1], sizes


@pytest.mark.parametrize(
    "kind", ["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
async def test_retention_never_empties_the_conversation(
    kind: str, tmp_path: Any, thread_id: str
) -> None:
    """A prune keeps every retained turn's messages: the oldest checkpoint it keeps gets its
    own snapshot of them first (a naive keep-latest empties a delta channel)."""
    from mcp_state_versions import prune_thread, run_turn

    from ..conftest import open_backend
    from ..helpers import agent_on

    config: Any = {"configurable": {"thread_id": thread_id}}
    async with await open_backend(kind, tmp_path) as saver:
        agent = agent_on(saver)
        for turn in range(6):
            await run_turn(agent, thread_id, "find Oslo" if turn % 2 else "find Aarhus")
        before = _plain((await agent.aget_state(config)).values["messages"])
        assert len(before) == 24
        result = await prune_thread(saver, thread_id, keep_turns=2)
        assert result.retained_turns == range(5, 7)
        assert _plain((await agent.aget_state(config)).values["messages"]) == before
        assert await _fresh_read(kind, saver, tmp_path, config) == before
        oldest = [s async for s in agent.aget_state_history(config)][-1]
        assert _plain(oldest.values["messages"]) == before[: len(oldest.values["messages"])]
        assert len(oldest.values["messages"]) >= 16
        await run_turn(agent, thread_id, "find Oslo")
        after = _plain((await agent.aget_state(config)).values["messages"])
        assert after[:24] == before and len(after) == 28
        assert await _fresh_read(kind, saver, tmp_path, config) == after
        if kind != "postgres":  # the savers' own keep-latest
            await saver.aprune([thread_id])
            assert await _fresh_read(kind, saver, tmp_path, config) == after


def test_remove_all_is_langgraph_own_constant() -> None:
    """The id that removes every message is LangGraph's, written where reading needs it."""
    from langgraph.graph.message import REMOVE_ALL_MESSAGES as LANGGRAPH_REMOVE_ALL

    from mcp_state_versions.storage.messages import REMOVE_ALL_MESSAGES

    assert REMOVE_ALL_MESSAGES == LANGGRAPH_REMOVE_ALL


LONE_FORMS = {
    "message": lambda n: AIMessage(f"m{n}"),
    "dict": lambda n: {"role": "assistant", "content": f"m{n}"},
    "string": lambda n: f"m{n}",
    "tuple": lambda n: ("ai", f"m{n}"),
    "list-of-one-tuple": lambda n: [("ai", f"m{n}")],
    "list-of-forms": lambda n: [("ai", f"m{n}"), f"s{n}", {"role": "user", "content": f"u{n}"}],
}


@pytest.mark.parametrize(
    "kind", ["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
@pytest.mark.parametrize("form", sorted(LONE_FORMS))
async def test_every_form_add_messages_takes_alone_or_listed_reads_back_as_written(
    kind: str, form: str, tmp_path: Any, thread_id: str
) -> None:
    """A node's write in each form ``add_messages`` accepts reads back after a reload as it
    merged live and as ``add_messages`` reads it. A lone ``("ai", "hello")`` was stored as the
    serializer's list ``["ai", "hello"]`` and read back as two human messages."""
    from langgraph.graph import END, START, StateGraph

    from mcp_state_versions.storage.channels import make_session_state

    from ..conftest import open_backend

    make = LONE_FORMS[form]
    counter = iter(range(1_000))

    def node(state: Any) -> Any:
        return {"messages": make(next(counter))}

    config: Any = {"configurable": {"thread_id": thread_id}}
    async with await open_backend(kind, tmp_path) as saver:
        graph = StateGraph(make_session_state())
        graph.add_node("n", node)
        graph.add_edge(START, "n")
        graph.add_edge("n", END)
        app = graph.compile(checkpointer=saver)
        expected: list[Any] = []
        for turn in range(3):
            live = (await app.ainvoke({"messages": [("user", f"hi {turn}")]}, config))["messages"]
            expected = add_messages(add_messages(expected, [("user", f"hi {turn}")]), make(turn))
            assert [(m.type, m.content) for m in live] == [(m.type, m.content) for m in expected]
        assert _plain(live) == await _fresh_read(kind, saver, tmp_path, config)
