"""The seed's scenario end to end through ``build_agent``, and the wiring around it."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool

from mcp_state_versions import ScriptedChatModel, build_agent, run_turn, with_session_state
from mcp_state_versions.demo.run import get_aoi, run_demo
from mcp_state_versions.demo.scripted import ScriptExhausted, call
from mcp_state_versions.savers.memory import PruningInMemorySaver
from mcp_state_versions.walk.checkpoints import CheckpointHistory

from ..conftest import runtime_for

BBOX = "gazet/get_aoi/bbox"


def seed_script() -> list[AIMessage]:
    return [
        AIMessage("", tool_calls=[call("get_aoi", "a", place="Copenhagen")]),
        AIMessage("found"),
        AIMessage("Denmark."),
        AIMessage("", tool_calls=[call("get_aoi", "b", place="Aarhus")]),
        AIMessage(
            "",
            tool_calls=[
                call("inspect_state", "c", key="*"),
                call("inspect_state", "d", key=BBOX, turn=1),
                call("inspect_state", "e", key=BBOX, turn=3),
            ],
        ),
        AIMessage("compared"),
    ]


class SpyHistory(CheckpointHistory):
    """The real walk, counting how often it is asked."""

    calls = 0

    async def tool_state_at(self, thread_id: str, turn: int):  # type: ignore[no-untyped-def]
        SpyHistory.calls += 1
        return await super().tool_state_at(thread_id, turn)

    async def ended_tool_state(self, thread_id: str, turn: int):  # type: ignore[no-untyped-def]
        SpyHistory.calls += 1
        return await super().ended_tool_state(thread_id, turn)


@pytest.mark.parametrize("with_history", [False, True])
async def test_seed_scenario_through_the_agent(with_history: bool) -> None:
    saver = PruningInMemorySaver()
    # history=None proves the turn=1 answer comes from the ring; the spy proves no walk ran.
    history = SpyHistory(saver) if with_history else None
    SpyHistory.calls = 0
    agent = build_agent(
        ScriptedChatModel(replies=seed_script()), [get_aoi], checkpointer=saver, history=history
    )
    for text in ["Find Copenhagen", "Which country?", "Find Aarhus and compare"]:
        state = await run_turn(agent, "seed", text)
    replies = {
        m.tool_call_id: str(m.content) for m in state["messages"] if isinstance(m, ToolMessage)
    }
    assert replies["a"].startswith("[state updated: gazet/get_aoi/bbox")
    assert f"{BBOX}: list[4] of 9.9 — rewritten, 2 versions" in replies["c"]
    assert replies["d"].endswith("[12.4, 55.5, 12.7, 55.8]")
    assert replies["e"].endswith("[9.9, 56.1, 10.3, 56.2]")
    assert SpyHistory.calls == 0
    entry = state["tool_state"][BBOX]
    assert (entry["versions"], entry["turn"], entry["tool"]) == (2, 3, "get_aoi")


def test_with_session_state_adds_exactly_one_inspect_state() -> None:
    tools = with_session_state([get_aoi], PruningInMemorySaver())
    assert [t.name for t in tools] == ["get_aoi", "inspect_state"]

    @tool
    def inspect_state(key: str) -> str:
        """A clashing tool."""
        return key

    with pytest.raises(ValueError, match="already include an 'inspect_state'"):
        with_session_state([inspect_state])


async def test_run_turn_stamps_the_turn_into_checkpoint_metadata() -> None:
    saver = PruningInMemorySaver()
    agent = build_agent(
        ScriptedChatModel(replies=[AIMessage("one"), AIMessage("two")]), [], checkpointer=saver
    )
    await run_turn(agent, "t", "hello")
    await run_turn(agent, "t", "again")
    stamps = [
        (c.metadata.get("source"), c.metadata.get("mcp_state_versions_turn"))
        async for c in saver.alist({"configurable": {"thread_id": "t"}})
    ]
    assert ("input", 2) in stamps and ("loop", 2) in stamps and ("loop", 1) in stamps
    assert (await CheckpointHistory(saver).turns("t")).total == 2


async def test_a_script_that_runs_out_fails_loudly() -> None:
    agent = build_agent(ScriptedChatModel(replies=[]), [])
    with pytest.raises(ScriptExhausted, match="all were used"):
        await agent.ainvoke({"messages": [("user", "hi")]})


async def test_the_demo_runs_and_shows_each_outcome() -> None:
    lines: list[str] = []
    await run_demo(PruningInMemorySaver(), out=lines.append)
    text = "\n".join(lines)
    assert "rewritten, 2 versions" in text
    assert "at the end of turn 1 (held turns 1–2)" in text
    assert "Turn 7 never happened" in text
    assert "Turn 1 is no longer retained" in text
    assert text.count("[12.4, 55.5, 12.7, 55.8]") >= 3  # turn 1 read before and after pruning


def test_a_synchronous_run_reads_the_ring_and_the_walk() -> None:
    saver = PruningInMemorySaver()
    script = [
        AIMessage("", tool_calls=[call("get_aoi", "a", place="Copenhagen")]),
        AIMessage("ok"),
        AIMessage("", tool_calls=[call("get_aoi", "b", place="Aarhus")]),
        AIMessage("ok"),
        AIMessage(
            "",
            tool_calls=[
                call("inspect_state", "c", key=BBOX, turn=1),
                call("inspect_state", "d", key=BBOX, versions=True),
            ],
        ),
        AIMessage("done"),
    ]
    config = {"configurable": {"thread_id": "sync"}}
    for ring_size in (8, 0):
        agent = build_agent(
            ScriptedChatModel(replies=script), [get_aoi], checkpointer=saver, ring_size=ring_size
        )
        config = {"configurable": {"thread_id": f"sync-{ring_size}"}}
        for text in ["Find Copenhagen", "Find Aarhus", "Compare"]:
            state = agent.invoke({"messages": [("user", text)]}, config)
        replies = {
            m.tool_call_id: str(m.content) for m in state["messages"] if isinstance(m, ToolMessage)
        }
        assert replies["c"].endswith("[12.4, 55.5, 12.7, 55.8]")
        assert "9.9" not in replies["c"]
        assert "has held 2 values" in replies["d"]


async def test_build_agent_captures_text_results_and_a_tool_can_opt_out() -> None:
    """A tool returning text is versioned in build_agent too: published as
    tools/<tool>/result, rewritten in a later turn, read back as of the first."""
    from mcp_state_versions import read_state_key

    @tool
    def weather(city: str) -> str:
        """Today's weather in a city."""
        return {"Oslo": "rain", "Rome": "sun"}[city]

    def respond(messages: list) -> AIMessage:
        last = messages[-1]
        if isinstance(last, ToolMessage):
            return AIMessage("ok")
        return AIMessage("", tool_calls=[call("weather", f"w{len(messages)}", city=last.content)])

    for capture in (True, ["other"]):
        agent = build_agent(
            ScriptedChatModel(respond=respond),
            [weather],
            checkpointer=PruningInMemorySaver(),
            capture=capture,
        )
        await run_turn(agent, "t", "Oslo")
        state = await run_turn(agent, "t", "Rome")
        reply = [m for m in state["messages"] if isinstance(m, ToolMessage)][-1]
        if capture is True:
            assert reply.content == (
                "[state updated: tools/weather/result — replaces the value it held since "
                "turn 1] sun"
            )
            assert "tools/weather/result: " in read_state_key("*", state)
            assert "rewritten, 2 versions" in read_state_key("*", state)
            (inspect,) = with_session_state([])
            text = await inspect.ainvoke(
                {"key": "tools/weather/result", "turn": 1, "runtime": runtime_for(state)}
            )
            assert text.endswith('"rain"'), text
        else:
            assert reply.content == "sun" and "Session state is empty" in read_state_key("*", state)


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def test_a_run_start_reads_the_head_s_stamp_in_one_query(kind: str, tmp_path: Any) -> None:
    """``run_turn`` learns the turn it opens from the stamp of the thread's newest checkpoint:
    one query for that link, not one for the head's id and another for its link (on
    PostgreSQL every query is a round trip, and this one is in every turn)."""
    from uuid import uuid4

    from mcp_state_versions.backends import backend_for, stamp_turn

    from ..conftest import open_backend
    from ..helpers import agent_on

    thread_id = f"head-link-{uuid4().hex}"
    async with await open_backend(kind, tmp_path) as saver:
        agent = agent_on(saver, ring_size=0)
        for text in ["find Copenhagen", "find Aarhus"]:
            await run_turn(agent, thread_id, text)
        backend = backend_for(saver)
        head = await backend.head(thread_id, "")
        assert head is not None
        queries: list[str] = []
        rows = backend._rows  # type: ignore[attr-defined]

        async def recording(sql: str, params: Any) -> Any:
            queries.append(sql)
            return await rows(sql, params)

        backend._rows = recording  # type: ignore[attr-defined]
        link = await backend.link(thread_id, "")
        assert len(queries) == 1, queries
        assert link == await backend.parent_of(thread_id, "", head)
        assert link is not None and link.source == "loop" and stamp_turn(link.stamp) == 2
        assert await backend.link(f"{thread_id}-none", "") is None


async def test_a_mapping_whose_keys_cannot_be_fields_is_captured_whole_with_secrets_withheld() -> (
    None
):
    """A tool returning a dict with a key holding "/" or an empty key: stored as one value under
    tools/<tool>/result (not left whole in the message only), its secret-named fields withheld
    from state and from the message."""

    @tool
    def paths() -> dict:
        """Sizes by path."""
        return {"a/b": 1, "": 2, "ok": 3, "password": "hunter2"}

    script = [AIMessage("", tool_calls=[call("paths", "p1")]), AIMessage("ok")]
    agent = build_agent(
        ScriptedChatModel(replies=script), [paths], checkpointer=PruningInMemorySaver()
    )
    state = await run_turn(agent, "odd-keys", "sizes")
    assert state["tool_state"]["tools/paths/result"]["value"] == {"a/b": 1, "": 2, "ok": 3}
    reply = [m for m in state["messages"] if isinstance(m, ToolMessage)][-1]
    assert "hunter2" not in str(reply.content)
    assert "[state updated: tools/paths/result" in str(reply.content)
    assert "tools/paths/result.password" in str(reply.content)
