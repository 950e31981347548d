"""Resolving a read, once for every reader: a key's whole version list, beyond its ring.

The tool, the command line and HTTP all list the same versions from one resolution; older
versions come from history at one read each, along the branch, and pruned turns are said to be.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from mcp_state_versions.agent.build import run_turn
from mcp_state_versions.agent.inspect_state import make_inspect_state
from mcp_state_versions.api import create_app
from mcp_state_versions.cli import main
from mcp_state_versions.savers.specs import open_checkpointer
from mcp_state_versions.walk.checkpoints import CheckpointHistory
from mcp_state_versions.walk.history import TurnIndex, TurnSnapshot
from mcp_state_versions.walk.resolve import resolve_versions, versioned_entries

from ..conftest import runtime_for
from ..helpers import BBOX, agent_on, fork_at

PLACES = ["Copenhagen", "Aarhus", "Oslo", "Copenhagen", "Aarhus", "Oslo"]
COPENHAGEN, AARHUS, OSLO = (
    [12.4, 55.5, 12.7, 55.8],
    [9.9, 56.1, 10.3, 56.2],
    [10.6, 59.8, 10.9, 60.0],
)


class CountingHistory:
    """A real history that counts the turn reads a resolution asks of it."""

    def __init__(self, history: CheckpointHistory) -> None:
        self.history, self.reads = history, 0

    async def turns(self, thread_id: str) -> TurnIndex:
        return await self.history.turns(thread_id)

    async def tool_state_at(self, thread_id: str, turn: int) -> TurnSnapshot:
        self.reads += 1
        return await self.history.tool_state_at(thread_id, turn)


async def six_areas(saver: Any, thread_id: str) -> Any:
    """Six turns, each finding another area, with a ring of one prior version."""
    agent = agent_on(saver, ring_size=1)
    for place in PLACES:
        await run_turn(agent, thread_id, f"find {place}")
    return agent


async def test_every_version_from_history_one_read_each(saver: Any, thread_id: str) -> None:
    agent = await six_areas(saver, thread_id)
    state = (await agent.aget_state({"configurable": {"thread_id": thread_id}})).values
    entry = versioned_entries(state["tool_state"])[BBOX]
    history = CountingHistory(CheckpointHistory(saver))
    rows = await resolve_versions(entry, BBOX, current_turn=6, history=history, thread_id=thread_id)
    expected = [COPENHAGEN, AARHUS, OSLO, COPENHAGEN, AARHUS, OSLO]
    assert [(row.since, row.until, row.value) for row in rows] == [
        (turn, None if turn == 6 else turn, value) for turn, value in enumerate(expected, 1)
    ]
    assert [row.source for row in rows] == ["history"] * 4 + ["ring"] * 2
    # At most one read a version beyond the ring, and fewer: each entry read comes with its
    # own ring of one, so turn 4's entry gives turns 3 and 4, turn 2's gives 1 and 2.
    assert history.reads == 2


async def test_a_fork_lists_its_own_branch_only(saver: Any, thread_id: str) -> None:
    """After a fork from turn 2, the versions are turn 1–2's and the fork's; the abandoned
    branch's turns 3–6 never appear."""
    agent = await six_areas(saver, thread_id)
    await fork_at(agent, thread_id, 2, "find Oslo")
    await run_turn(agent, thread_id, "find Oslo")  # not a new version: the same value
    state = (await agent.aget_state({"configurable": {"thread_id": thread_id}})).values
    entry = versioned_entries(state["tool_state"])[BBOX]
    rows = await resolve_versions(
        entry, BBOX, current_turn=4, history=CheckpointHistory(saver), thread_id=thread_id
    )
    assert [(row.since, row.until, row.value) for row in rows] == [
        (1, 1, COPENHAGEN),
        (2, 2, AARHUS),
        (3, None, OSLO),
    ]


async def test_without_history_the_rows_beyond_the_ring_say_so(saver: Any, thread_id: str) -> None:
    agent = await six_areas(saver, thread_id)
    state = (await agent.aget_state({"configurable": {"thread_id": thread_id}})).values
    entry = versioned_entries(state["tool_state"])[BBOX]
    rows = await resolve_versions(entry, BBOX, current_turn=6)
    assert [(row.since, row.until, row.status, row.count) for row in rows] == [
        (None, 4, "no_history", 4),
        (5, 5, "kept", 1),
        (6, None, "kept", 1),
    ]


@pytest.mark.parametrize("pruned", [False, True])
def test_the_tool_the_cli_and_http_list_the_same_versions(
    tmp_path: Any, capsys: pytest.CaptureFixture[str], pruned: bool
) -> None:
    spec, thread_id = f"sqlite:{tmp_path / 'areas.sqlite'}", "versions-everywhere"

    async def write_and_read() -> tuple[str, dict[str, Any]]:
        async with open_checkpointer(spec) as saver:
            agent = await six_areas(saver, thread_id)
            if pruned:
                from mcp_state_versions.retention.prune import prune_thread

                await prune_thread(saver, thread_id, keep_turns=3)
            state = (await agent.aget_state({"configurable": {"thread_id": thread_id}})).values
            runtime = runtime_for(state, thread_id)
            runtime.config["configurable"]["__pregel_checkpointer"] = saver
            tool = make_inspect_state()
            text = await tool.coroutine(key=BBOX, versions=True, runtime=runtime)  # type: ignore[misc]
            transport = httpx.ASGITransport(app=create_app(saver))
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
                response = await http.get(f"/threads/{thread_id}/state/{BBOX}/versions")
            return text, response.json()

    text, over_http = asyncio.run(write_and_read())
    code = main(
        ["inspect", "--checkpointer", spec, "--thread", thread_id, BBOX, "--versions", "--json"]
    )
    from_cli = json.loads(capsys.readouterr().out)
    assert code == 0 and from_cli["items"] == over_http["items"]
    assert from_cli["value"] == over_http["value"] == OSLO
    lines = text.splitlines()[1:]
    assert len(lines) == len(over_http["items"])
    for line, item in zip(lines, over_http["items"], strict=True):
        if item["status"] == "kept":
            assert line.endswith(": " + json.dumps(item["value"])), (line, item)
        else:
            assert item["status"] == "pruned" and "pruned" in line
    if pruned:  # turns 1–3 pruned; turn 4's entry (retained) still rings turn 3's version
        assert [(i["since"], i["status"], i["count"]) for i in over_http["items"]] == [
            (None, "pruned", 2),
            (3, "kept", 1),
            (4, "kept", 1),
            (5, "kept", 1),
            (6, "kept", 1),
        ]
    else:
        assert [i["value"] for i in over_http["items"]] == [
            COPENHAGEN,
            AARHUS,
            OSLO,
            COPENHAGEN,
            AARHUS,
            OSLO,
        ]


async def test_a_timeline_from_any_history_equals_the_one_pass(saver: Any, thread_id: str) -> None:
    """A ThreadHistory without turn_states is read a turn at a time; the timeline is the one
    CheckpointHistory's single pass gives: every key, where each of its versions began."""
    from mcp_state_versions.walk.resolve import resolve_timeline

    await six_areas(saver, thread_id)
    one_pass = await resolve_timeline(CheckpointHistory(saver), thread_id)
    counting = CountingHistory(CheckpointHistory(saver))
    turn_by_turn = await resolve_timeline(counting, thread_id)  # type: ignore[arg-type]
    assert turn_by_turn == one_pass and counting.reads == 6
    bbox = next(row for row in one_pass.keys if row.key == BBOX)
    assert bbox.starts == [1, 2, 3, 4, 5, 6] and bbox.first_written == 1 and bbox.versions == 6


async def test_a_limited_version_list_is_the_newest_rows_and_one_row_for_the_rest(
    saver: Any, thread_id: str
) -> None:
    """``limit`` cuts the list to its newest rows and says how many came before, as one
    ``unlisted`` row ending where the listed ones begin; the model's list (the newest 20)
    names a turn to read the older ones with."""
    from langchain_core.messages import HumanMessage

    from mcp_state_versions.agent.inspect_state import MODEL_VERSIONS_LIMIT

    from ..conversation import PUT, agent_graph

    agent = agent_graph(saver, 2)
    config = {"configurable": {"thread_id": thread_id}}
    for turn in range(1, 25):
        await agent.ainvoke({"messages": [HumanMessage(f"put k=v{turn}")]}, config)
    state = (await agent.aget_state(config)).values
    entry = versioned_entries(state["tool_state"])[PUT + "k"]
    history = CheckpointHistory(saver)
    whole = await resolve_versions(
        entry, PUT + "k", current_turn=24, history=history, thread_id=thread_id
    )
    assert [row.value for row in whole] == [f"v{turn}" for turn in range(1, 25)]
    for limit in (1, 5, 23, 24, 30):
        rows = await resolve_versions(
            entry, PUT + "k", current_turn=24, history=history, thread_id=thread_id, limit=limit
        )
        if limit >= 24:
            assert rows == whole
            continue
        assert rows[1:] == whole[-limit:]
        assert (rows[0].status, rows[0].since, rows[0].until, rows[0].count) == (
            "unlisted",
            None,
            24 - limit,
            24 - limit,
        )
    with pytest.raises(ValueError, match="at least 1"):
        await resolve_versions(entry, PUT + "k", current_turn=24, limit=0)
    text = await make_inspect_state(history=history).ainvoke(
        {"key": PUT + "k", "versions": True, "runtime": runtime_for(state, thread_id)}
    )
    assert text.count("\n- ") == MODEL_VERSIONS_LIMIT + 1
    older = "- 4 versions held before turn 5: (older, not listed here: read one with turn="
    assert older + ", e.g. turn=4)" in text
