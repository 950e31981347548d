"""``inspect_state`` and ``read_state_key``: what the model reads, including for bad calls."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from mcp_state_versions.agent.inspect_state import make_inspect_state, read_state_key
from mcp_state_versions.state.reducer import make_merge_tool_state, merge_tool_state
from mcp_state_versions.walk.history import TurnIndex, TurnSnapshot
from mcp_state_versions.wording.answers import LISTING_LINES

from ..conftest import runtime_for

BBOX = "gazet/get_aoi/bbox"
CPH = [12.4, 55.5, 12.7, 55.8]
AAR = [9.9, 56.1, 10.3, 56.2]


def seed_state() -> dict[str, Any]:
    tool_state = merge_tool_state({}, {BBOX: {"value": CPH, "tool": "get_aoi", "turn": 1}})
    tool_state = merge_tool_state(
        tool_state,
        {
            BBOX: {"value": AAR, "tool": "get_aoi", "turn": 3},
            "gazet/get_aoi/feature": {
                "value": {"name": "Aarhus", "image": "data:image/png;base64," + "A" * 5000},
                "turn": 3,
            },
        },
    )
    messages = [HumanMessage("one"), HumanMessage("two"), HumanMessage("three")]
    return {"messages": messages, "tool_state": tool_state}


async def ask(state: Any, history: Any = None, thread_id: str | None = "t", **args: Any) -> str:
    tool = make_inspect_state(history=history)
    return await tool.ainvoke({**args, "runtime": runtime_for(state, thread_id)})


def test_listing_marks_the_rewritten_key() -> None:
    text = read_state_key("*", seed_state())
    assert f"{BBOX}: list[4] of 9.9 — rewritten, 2 versions" in text
    assert "gazet/get_aoi/feature: object{name, image}\n" in text
    assert "turn=N" in text


def test_single_read_notes_the_rewrite_and_redacts_data_uris() -> None:
    text = read_state_key(BBOX, seed_state())
    assert text.startswith("[9.9, 56.1, 10.3, 56.2]")
    assert "has held 2 values" in text and "turn=N" in text
    feature = read_state_key("gazet/get_aoi/feature", seed_state())
    assert "<image/png, 5,022 chars, redacted>" in feature and "AAAA" not in feature


async def test_turn_reads_come_from_the_ring_without_history() -> None:
    state = seed_state()
    assert str(CPH) in await ask(state, key=BBOX, turn=1)
    assert "turns 1–2" in await ask(state, key=BBOX, turn=2)
    assert str(AAR) in await ask(state, key=BBOX, turn=3)
    not_yet = await ask(state, key="gazet/get_aoi/feature", turn=2)
    assert "was not set yet at the end of turn 2" in not_yet and "first set in turn 3" in not_yet


async def test_versions_lists_every_value_in_one_call() -> None:
    text = await ask(seed_state(), key=BBOX, versions=True)
    assert "has held 2 values" in text
    assert f"turns 1–2: {CPH}" in text and f"turn 3 on (current): {AAR}" in text


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        ({"key": BBOX, "turn": 0}, "turn must be 1 or more"),
        ({"key": BBOX, "turn": -2}, "turn must be 1 or more"),
        ({"key": BBOX, "turn": "first"}, "turn must be a whole number"),
        ({"key": BBOX, "turn": 1.5}, "turn must be a whole number"),
        ({"key": BBOX, "turn": True}, "turn must be a whole number"),
        ({"key": BBOX, "turn": 10**12}, "Turn 1000000000000 never happened: this thread has had 3"),
        ({"key": BBOX, "turn": 4}, "Call again with a turn from 1 to 3"),
        ({"key": "gazet/get_aoi/bbx"}, "Did you mean gazet/get_aoi/bbox"),
        ({"key": "nothing", "turn": 1}, "No key 'nothing'"),
        ({"key": 42}, "key must be a state key"),
        ({"key": BBOX, "path": "features[0]"}, "index it with a number"),
        ({"key": BBOX, "path": "[9]"}, "index 9 is out of range"),
        (
            {"key": "gazet/get_aoi/feature", "path": "geometry"},
            "has no key 'geometry'; it has: name",
        ),
        ({"key": BBOX, "pattern": "[9.9"}, "matched as plain text"),
        ({"key": "*", "turn": 1}, 'call key="*" without them'),
        ({"key": BBOX, "versions": "maybe"}, "versions must be true or false"),
    ],
)
async def test_bad_calls_are_answered_not_raised(args: dict[str, Any], fragment: str) -> None:
    assert fragment in await ask(seed_state(), **args)


async def test_turn_read_strings_and_state_references_are_accepted() -> None:
    assert str(CPH) in await ask(seed_state(), key=f"@state:{BBOX}", turn="1")


async def test_path_and_pattern_narrow_an_old_value() -> None:
    text = await ask(seed_state(), key=BBOX, turn=1, path="[0]")
    assert text.endswith("\n12.4")
    text = await ask(seed_state(), key=BBOX, turn=1, pattern=r"^\[3\]")
    assert text.endswith("[3] = 55.8")


def three_turns(ring_size: int) -> dict[str, Any]:
    """A state whose key "k" held v1, v2 and v3 in turns 1-3, with a ring of ``ring_size``."""
    reducer = make_merge_tool_state(ring_size=ring_size)
    tool_state: dict = {}
    for turn, value in enumerate(["v1", "v2", "v3"], start=1):
        tool_state = reducer(tool_state, {"k": {"value": value, "turn": turn}})
    return {"messages": [HumanMessage(str(i)) for i in range(3)], "tool_state": tool_state}


async def test_without_history_an_old_version_is_refused_not_substituted() -> None:
    state = three_turns(ring_size=1)
    text = await ask(state, key="k", turn=1)
    assert "keeps no turn history" in text and "reach back only to turn 2" in text
    assert "v3" not in text and "Do not use the current value" in text


class StubHistory:
    """A ThreadHistory that has pruned everything before turn 2."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    async def turns(self, thread_id: str) -> TurnIndex:
        return TurnIndex(3, (2, 3))

    async def tool_state_at(self, thread_id: str, turn: int) -> TurnSnapshot:
        self.calls.append((thread_id, turn))
        return TurnSnapshot(turn, TurnIndex(3, (2, 3)), None)


async def test_ring_first_history_second_and_pruned_is_its_own_answer() -> None:
    state = three_turns(ring_size=0)
    history = StubHistory()
    assert "v3" in await ask(state, history=history, key="k", turn=3)
    assert history.calls == []  # the current version answered from the entry
    text = await ask(state, history=history, key="k", turn=1)
    assert history.calls == [("t", 1)]
    assert "Turn 1 is no longer retained" in text and "Retained turns: 2–3" in text
    assert "v3" not in text


@pytest.mark.parametrize(
    "tool_state",
    [["not", "a", "dict"], "text", 7],
)
async def test_a_tool_state_that_is_not_a_dict_is_explained(tool_state: Any) -> None:
    state = {"messages": [HumanMessage("x")], "tool_state": tool_state}
    assert "Session state cannot be read" in read_state_key("*", state)
    assert "Session state cannot be read" in await ask(state, key="k", turn=1)


async def test_values_that_are_not_json_are_shown_not_raised() -> None:
    state = {
        "messages": [HumanMessage("x")],
        "tool_state": {"raw": {"when": datetime.date(2026, 1, 2), "n": {1, 2}}},
    }
    assert "raw: object{when, n}" in read_state_key("*", state)
    assert "<date: datetime.date(2026, 1, 2)>" in read_state_key("raw", state)
    assert "carries no version record" in await ask(state, key="raw", turn=1)


def test_allowed_keys_hide_the_rest() -> None:
    state = seed_state()
    assert read_state_key("*", state, allowed_keys=["*/bbox"]).startswith(BBOX)
    assert "No key 'gazet/get_aoi/feature'" in read_state_key(
        "gazet/get_aoi/feature", state, allowed_keys=["*/bbox"]
    )


def test_large_values_come_back_as_an_outline() -> None:
    big = {"features": [{"name": f"f{i}", "coords": list(range(50))} for i in range(40)]}
    state = {"tool_state": merge_tool_state({}, {"k": {"value": big, "turn": 1}})}
    text = read_state_key("k", state)
    assert "too large to show whole" in text
    assert "features: list[40] of object[2 keys]" in text and "features[0].coords" in text
    assert read_state_key("k", state, path="features[3].name") == '"f3"'


def test_an_evicted_value_says_how_to_read_it() -> None:
    reducer = make_merge_tool_state(budget_bytes=150)
    tool_state = reducer({}, {"old": {"value": "a" * 100, "turn": 1}})
    tool_state = reducer(tool_state, {"new": {"value": "b" * 100, "turn": 2}})
    state = {"messages": [HumanMessage("1"), HumanMessage("2")], "tool_state": tool_state}
    assert "old: (value evicted for size; read it with turn=1)" in read_state_key("*", state)
    text = read_state_key("old", state)
    assert "evicted from session state" in text and "turn=1" in text and "aaa" not in text


def test_a_small_value_evicted_to_make_room_is_not_called_too_large() -> None:
    """Two writes in one turn, in two updates: the second needs the room the first took, so
    the first (small) value goes; its reader is told that, not that it did not fit."""
    from mcp_state_versions import CLOCK_KEY

    reducer = make_merge_tool_state(budget_bytes=150)
    tool_state = reducer({}, {CLOCK_KEY: {"turn": 1, "open": True}})
    tool_state = reducer(tool_state, {"small": {"value": "a" * 20}})
    tool_state = reducer(tool_state, {"big": {"value": "b" * 140}})
    assert "value" not in tool_state["small"] and tool_state["small"]["displaced"]
    state = {"messages": [HumanMessage("1")], "tool_state": tool_state}
    listing = read_state_key("*", state)
    assert "small: (evicted to make room for later writes" in listing
    assert "too large" not in listing
    text = read_state_key("small", state)
    assert "to make room for values written after it" in text and "too large" not in text
    rewritten = reducer(tool_state, {"small": {"value": "c"}})
    assert "displaced" not in rewritten["small"]


class LaggingHistory(StubHistory):
    """History that has recorded two turns while the tool already runs in the third."""

    async def tool_state_at(self, thread_id: str, turn: int) -> TurnSnapshot:
        self.calls.append((thread_id, turn))
        return TurnSnapshot(turn, TurnIndex(2, (2,)), None)


async def test_a_history_behind_the_present_counts_the_present_as_retained() -> None:
    state = three_turns(ring_size=0)
    text = await ask(state, history=LaggingHistory(), key="k", turn=1)
    assert "Turn 1 is no longer retained" in text and "Retained turns: 2–3" in text


def test_the_model_sees_five_arguments_and_the_runtime_is_not_one_of_them() -> None:
    """The argument schema leaves out the injected runtime, so LangChain does not validate
    and dump the graph state on each call; the model's view of the tool is unchanged."""
    from langchain_core.utils.function_calling import convert_to_openai_tool

    tool = make_inspect_state()
    assert "runtime" not in tool.args_schema.model_fields
    assert "runtime" in tool._injected_args_keys
    parameters = convert_to_openai_tool(tool)["function"]["parameters"]
    assert parameters["required"] == ["key"]
    turn = parameters["properties"].pop("turn")  # a number, or a range of turns as text
    assert turn["anyOf"] == [{"type": "integer", "minimum": 1}, {"type": "string"}]
    assert {name: spec["type"] for name, spec in parameters["properties"].items()} == {
        "key": "string",
        "pattern": "string",
        "path": "string",
        "versions": "boolean",
    }


def _many(toolsets: int, tools: int, fields: int) -> dict[str, Any]:
    writes = {
        f"s{a}/tool{b}/f{c}": {"value": c, "tool": f"tool{b}"}
        for a in range(toolsets)
        for b in range(tools)
        for c in range(fields)
    }
    state = merge_tool_state({}, writes)
    state = merge_tool_state(state, {"s0/tool0/f0": {"value": "new", "turn": 2}})
    return {"messages": [HumanMessage("one"), HumanMessage("two")], "tool_state": state}


def test_a_listing_of_many_keys_groups_them_and_narrows_by_prefix() -> None:
    state = _many(10, 50, 10)  # 5,000 keys in 500 tools
    first = read_state_key("*", state)
    assert len(first) <= 4000
    assert first.startswith(
        "5000 keys, too many to list one by one; by group:\ns0/*: 500 keys, 1 rewritten\n"
    )
    assert 's9/*: 500 keys\n(List one group with key="s0/*"' in first
    by_tool = read_state_key("s0/*", state)
    assert by_tool.startswith(
        "500 keys, too many to list one by one; by group:\ns0/tool0/*: 10 keys, 1"
    )
    assert by_tool.count("\n") == LISTING_LINES + 2  # 40 groups, the count of the rest, the hint
    assert "+ 10 more groups" in by_tool
    one = read_state_key("s0/tool0/*", state)
    assert one.splitlines()[0] == 's0/tool0/f0: "new" — rewritten, 2 versions'
    assert len(one.splitlines()) == 11
    assert read_state_key("*", state, pattern="f9: ").startswith("500 keys matching 'f9: '")
    assert read_state_key("nope/*", state) == "No key starts with 'nope/'."


async def test_turn_reads_of_a_prefix_are_refused() -> None:
    text = await ask(_many(1, 1, 3), key="s0/*", turn=1)
    assert text.startswith("turn= and versions= read one key")


async def _versions_text(ring_size: int, keep_turns: int | None, thread_id: str) -> str:
    """Six turns put k=v1..v6 (turn 3 writes it twice); then an optional prune; then the
    model's versions=true listing, read through the run's checkpointer."""
    from langgraph.checkpoint.memory import InMemorySaver

    from mcp_state_versions import prune_thread

    from ..conversation import PUT, Conversation, agent_graph

    saver = InMemorySaver()
    conv = Conversation(agent_graph(saver, ring_size=ring_size), saver, thread_id)
    for turn in range(1, 7):
        await conv.say(f"put k=v{turn}")
    if keep_turns is not None:
        await prune_thread(saver, conv.thread_id, keep_turns=keep_turns)
    state = (await conv.graph.aget_state(conv.config)).values
    tool = make_inspect_state()
    runtime = runtime_for(state, conv.thread_id)
    runtime.config["configurable"]["__pregel_checkpointer"] = saver
    return await tool.coroutine(key=PUT + "k", versions=True, runtime=runtime)  # type: ignore[misc]


async def test_versions_lists_every_version_beyond_the_ring_from_history() -> None:
    """A ring of one keeps v5; v1..v4 are read from history, each with its own turn."""
    text = await _versions_text(ring_size=1, keep_turns=None, thread_id="all-versions")
    assert text.splitlines() == [
        "ts/put/k has held 6 values, oldest first:",
        '- turn 1: "v1"',
        '- turn 2: "v2"',
        '- turn 3: "v3"',
        '- turn 4: "v4"',
        '- turn 5: "v5"',
        '- turn 6 on (current): "v6"',
    ], text


async def test_after_a_prune_versions_says_which_were_pruned() -> None:
    """The ring keeps two prior values and a prune keeps two turns: the three versions
    before turn 4 are one line saying their turns were pruned; no turn= read is offered."""
    text = await _versions_text(ring_size=2, keep_turns=2, thread_id="pruned-versions")
    assert text.splitlines() == [
        "ts/put/k has held 6 values, oldest first:",
        "- 3 versions held before turn 4: (those turns were pruned from this deployment's "
        "history: it cannot be read)",
        '- turn 4: "v4"',
        '- turn 5: "v5"',
        '- turn 6 on (current): "v6"',
    ], text
