"""Whatever a model sends, the run completes, the answer is text, and it is true.

Arguments go through a real ``ToolNode`` in a real agent graph; patterns run on a linear-time
engine off the event loop; answers from history read exactly like answers from the ring;
eviction is reported as what it is, never as pruning.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import ToolRuntime

from mcp_state_versions import (
    CheckpointHistory,
    Found,
    build_agent,
    make_inspect_state,
    make_merge_tool_state,
    prune_thread,
    publish,
    resolve_turn,
)
from mcp_state_versions.demo.scripted import ScriptedChatModel, call
from mcp_state_versions.wording.answers import describe_answer

from .conftest import runtime_for
from .conversation import PUT, Conversation, agent_graph, put, respond

KEY = PUT + "k"


class Fuzzer:
    """An agent whose model calls inspect_state with whatever arguments the test sets."""

    def __init__(self) -> None:
        self.args: dict[str, Any] = {}
        self.saver = InMemorySaver()
        self.agent = build_agent(
            ScriptedChatModel(respond=self.respond), [put], checkpointer=self.saver, ring_size=0
        )
        self.config = {"configurable": {"thread_id": "fuzz"}}
        for text in ("put k=EARLY-VALUE", "chat", "put k=CURRENT-VALUE"):
            self.agent.invoke({"messages": [HumanMessage(text)]}, self.config)

    def respond(self, messages: Sequence[BaseMessage]) -> AIMessage:
        last = messages[-1]
        if isinstance(last, HumanMessage) and last.content == "fuzz":
            fuzzed = {"name": "inspect_state", "args": self.args, "id": "z", "type": "tool_call"}
            return AIMessage("", tool_calls=[fuzzed])
        return respond(messages)

    async def ask(self, args: dict[str, Any]) -> str:
        self.args = args
        state = await self.agent.ainvoke({"messages": [HumanMessage("fuzz")]}, self.config)
        reply = [m for m in state["messages"] if isinstance(m, ToolMessage)][-1]
        assert isinstance(reply.content, str)
        return reply.content


json_any = st.recursive(
    st.none()
    | st.booleans()
    # 64-bit: the checkpointer's msgpack cannot store the model's message with a larger int.
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats()
    | st.text()
    | st.sampled_from(["1", " +1 ", "²", "+-1", "9" * 5000, "-3", "1e3", "１", KEY, "*"]),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=6,
)


@pytest.fixture(scope="module")
def fuzzer() -> Fuzzer:
    return Fuzzer()


@pytest.mark.parametrize(
    "turn",
    ["+-1", "²", "9" * 5000, "１", float("nan"), float("inf"), 2**62, -(2**62), [1], {"t": 1}],
)
async def test_turns_that_used_to_crash_the_run_are_answered(fuzzer: Fuzzer, turn: Any) -> None:
    text = await fuzzer.ask({"key": KEY, "turn": turn})
    assert "CURRENT-VALUE" not in text
    assert len(text) < 600


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.fixed_dictionaries(
        {},
        optional={
            "key": json_any | st.just(KEY),
            "turn": json_any | st.sampled_from([1, 1.0, "1", " 1 "]),
            "pattern": json_any,
            "path": json_any,
            "versions": json_any,
        },
    )
)
def test_any_json_for_any_argument_completes_with_a_true_text_answer(
    fuzzer: Fuzzer, args: dict[str, Any]
) -> None:
    text = asyncio.run(fuzzer.ask(args))
    if args.get("key") == KEY and args.get("turn") in (1, 1.0, "1", " 1 ", 2, "2"):
        assert "CURRENT-VALUE" not in text, text


def test_a_catastrophic_pattern_returns_at_once() -> None:
    state = {"tool_state": make_merge_tool_state()({}, {KEY: {"value": "a" * 100 + "!"}})}
    tool = make_inspect_state(history=None)
    started = time.perf_counter()
    text = tool.func(key=KEY, pattern="(a+)+$", runtime=runtime_for(state))  # type: ignore[misc]
    assert time.perf_counter() - started < 5  # Python's re takes longer than the universe
    assert text.startswith("No line matches")


@pytest.mark.parametrize("size", [3_000, 450_000, 700_000])
def test_a_huge_pattern_is_refused_in_words_and_not_echoed(size: int) -> None:
    """A pattern of hundreds of kilobytes (a value pasted by mistake) gets a short answer;
    past about 700 KB RE2 could not compile it at all, and that must not end the run."""
    from mcp_state_versions.wording.render import PatternError, compile_pattern

    state = {"tool_state": make_merge_tool_state()({}, {KEY: {"value": "abc"}})}
    tool = make_inspect_state(history=None)
    pattern = "x(" * (size // 2)
    for key in (KEY, "*"):
        text = tool.func(key=key, pattern=pattern, runtime=runtime_for(state))  # type: ignore[misc]
        assert "keep it under 2,000" in text and len(text) < 400, text[:400]
    with pytest.raises(PatternError, match="too large to search"):
        compile_pattern("a" * 3_000_000)


async def test_a_long_search_does_not_hold_up_the_event_loop() -> None:
    """A 1 MB value searched by the async tool: another coroutine keeps running meanwhile."""
    big = {f"f{i}": "x" * 100 for i in range(10_000)}  # about 1 MB of JSON
    state = {"tool_state": make_merge_tool_state()({}, {KEY: {"value": big}})}
    tool = make_inspect_state(history=None)
    ticks = 0

    async def other_thread() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.001)
            ticks += 1

    runner = asyncio.create_task(other_thread())
    text = await tool.coroutine(key=KEY, pattern="f9999 =", runtime=runtime_for(state))  # type: ignore[misc]
    runner.cancel()
    assert text == 'f9999 = "' + "x" * 100 + '"'
    assert ticks > 0


async def test_history_and_ring_answers_read_word_for_word_alike() -> None:
    """On a forked, pruned thread: wherever both answer, the texts are identical."""
    saver = InMemorySaver()
    convs = [Conversation(agent_graph(saver, ring), saver, f"alike-{ring}") for ring in (8, 0)]
    for conv in convs:
        for text in ["put k=a", "put k=b j=1", "chat", "put k=c", "put j=2"]:
            await conv.say(text)
        await conv.fork(3, "put k=fork")
        await conv.say("put k=d")
        await prune_thread(saver, conv.thread_id, keep_turns=4)
    texts: list[dict[tuple[str, int], str]] = []
    for conv in convs:
        values = (await conv.graph.aget_state(conv.config)).values
        found: dict[tuple[str, int], str] = {}
        for key in (PUT + "k", PUT + "j"):
            for turn in range(1, 6):
                answer = await resolve_turn(
                    values["tool_state"],
                    key,
                    turn,
                    current_turn=5,
                    history=CheckpointHistory(saver),
                    thread_id=conv.thread_id,
                )
                if isinstance(answer, Found):
                    found[(key, turn)] = describe_answer(answer)
        texts.append(found)
    ring, walk = texts
    common = set(ring) & set(walk)
    assert len(common) >= 6, (ring, walk)
    for where in common:
        assert ring[where] == walk[where], where


@tool
def bulk(runtime: ToolRuntime) -> Any:
    """Publish 300 fields of 40 KB each (12 MB, more than the 8 MiB budget)."""
    return publish(runtime, "big", "bulk", {f"f{i:03}": "x" * 40_000 for i in range(300)})


async def test_an_oversized_publish_names_what_it_could_not_keep() -> None:
    saver = InMemorySaver()
    script = [
        AIMessage("", tool_calls=[call("bulk", "b")]),
        AIMessage("ok"),
        AIMessage("", tool_calls=[call("inspect_state", "r", key="big/bulk/f299")]),
        AIMessage("", tool_calls=[call("inspect_state", "t", key="big/bulk/f299", turn=1)]),
        AIMessage("ok"),
    ]
    agent = build_agent(ScriptedChatModel(replies=script), [bulk], checkpointer=saver)
    config = {"configurable": {"thread_id": "bulk"}}
    state = await agent.ainvoke({"messages": [("user", "bulk")]}, config)
    reply = str(next(m.content for m in state["messages"] if isinstance(m, ToolMessage)))
    kept = [k for k, e in state["tool_state"].items() if k.startswith("big/") and "value" in e]
    dropped = [
        k for k, e in state["tool_state"].items() if k.startswith("big/") and "value" not in e
    ]
    assert len(kept) == 209 and len(dropped) == 91
    # the breadcrumb names a few keys of each kind and counts the rest
    assert reply.startswith(
        f"[state updated: {', '.join(kept[:5])} + 204 more] "
        f"[not kept: {', '.join(dropped[:5])} + 86 more — "
    )
    state = await agent.ainvoke({"messages": [("user", "read")]}, config)
    now, then = [str(m.content) for m in state["messages"] if isinstance(m, ToolMessage)][-2:]
    assert "was never stored and no read can return it" in now and "turn=" not in now
    assert "too large to keep" in then and "pruned" in then and "nothing was pruned" in then
