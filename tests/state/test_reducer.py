"""The reducer against a reference model of "every write ever, with its turn"."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from mcp_state_versions.state.clock import CLOCK_KEY, entries_of
from mcp_state_versions.state.reducer import (
    ToolStateError,
    make_merge_tool_state,
    merge_tool_state,
)
from mcp_state_versions.state.versions import (
    RingBeforeFirst,
    RingHit,
    RingMiss,
    ring_reaches_first,
    value_at_turn,
)

# -- strategies ---------------------------------------------------------------------------------

json_leaves = (
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.floats(allow_nan=False, allow_infinity=False, width=32)
    | st.text(max_size=4)
)
json_values = st.recursive(
    json_leaves,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=2), inner, max_size=3)
    ),
    max_leaves=8,
)
# A small pool so that republishes and returns to an earlier value happen often; 1, 1.0 and True
# are distinct versions, and so are [1] and [True].
pooled = st.sampled_from([1, 1.0, True, "a", [1], [True], {"x": 1}, {"x": 1, "y": 2}, None])
values = pooled | json_values | st.text(min_size=50, max_size=400)


@st.composite
def write_sequences(draw: Any) -> list[tuple[str, Any, int | None]]:
    """(key, value, turn) writes with non-decreasing turns; some writes carry no turn."""
    keys = ["a/t/x", "a/t/y", "b/u/z"]
    writes = []
    turn = draw(st.integers(0, 2))
    for _ in range(draw(st.integers(1, 30))):
        turn += draw(st.sampled_from([0, 0, 1, 1, 2]))
        stamped: int | None = None if draw(st.integers(0, 9)) == 0 else turn
        writes.append((draw(st.sampled_from(keys)), draw(values), stamped))
    return writes


# -- the reference model ------------------------------------------------------------------------


def canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


class Reference:
    """All writes, with effective turns; derives what an entry should say."""

    def __init__(self, writes: list[tuple[str, Any, int | None]]) -> None:
        self.by_key: dict[str, list[tuple[int, Any]]] = {}
        newest = 0
        for key, value, turn in writes:
            previous = self.by_key.get(key, [])
            effective = newest if turn is None else turn
            if previous:
                effective = max(effective, previous[-1][0])
            newest = max(newest, effective)
            self.by_key.setdefault(key, []).append((effective, value))

    def turn_end_values(self, key: str) -> list[tuple[int, Any]]:
        """(turn, value at its end) for each turn with a write to ``key``."""
        last: dict[int, Any] = {}
        for turn, value in self.by_key[key]:
            last[turn] = value
        return sorted(last.items())

    def versions(self, key: str) -> list[tuple[int, Any]]:
        """(first turn, value) per version: consecutive equal turn-end values are one."""
        runs: list[tuple[int, Any]] = []
        for turn, value in self.turn_end_values(key):
            if not runs or canon(runs[-1][1]) != canon(value):
                runs.append((turn, value))
        return runs

    def at(self, key: str, turn: int) -> tuple[bool, Any]:
        found = [value for since, value in self.versions(key) if since <= turn]
        return (True, found[-1]) if found else (False, None)


def fold(writes: list[tuple[str, Any, int | None]], reducer: Any = merge_tool_state) -> dict:
    state: dict = {}
    for key, value, turn in writes:
        write: dict[str, Any] = {"value": value, "tool": key.split("/")[-1]}
        if turn is not None:
            write["turn"] = turn
        state = reducer(state, {key: write})
    return state


# -- properties ---------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(write_sequences(), st.integers(0, 4))
def test_entries_match_the_reference(writes: list, ring_size: int) -> None:
    state = fold(writes, make_merge_tool_state(ring_size=ring_size))
    reference = Reference(writes)
    for key, entry in entries_of(state).items():
        versions = reference.versions(key)
        assert entry["versions"] == len(versions)
        assert canon(entry["value"]) == canon(versions[-1][1])
        assert entry["since"] == versions[-1][0]
        # The ring is a suffix of the prior versions (a same-turn return to the previous
        # value can shorten it), with values for at most the newest ring_size of them.
        prior = versions[:-1]
        ring = entry["ring"]
        assert len(ring) <= max(ring_size, 1)
        assert [i["turn"] for i in ring] == [t for t, _ in prior[len(prior) - len(ring) :]]
        for item, (_, value) in zip(ring, prior[len(prior) - len(ring) :], strict=True):
            if "value" in item:
                assert canon(item["value"]) == canon(value)
        assert sum("value" in i for i in ring) <= ring_size
        assert ring_reaches_first(entry) == (len(ring) == len(prior))
        last_turn = max(t for t, _ in reference.by_key[key])
        for turn in range(1, last_turn + 2):
            lookup = value_at_turn(entry, turn)
            had, value = reference.at(key, turn)
            if isinstance(lookup, RingHit):
                assert had and canon(lookup.value) == canon(value)
            elif isinstance(lookup, RingBeforeFirst):
                assert not had and lookup.first_turn == versions[0][0]
            else:
                # Deferring to history is right only where the ring lacks what would answer.
                assert isinstance(lookup, RingMiss)
                assert not ring_reaches_first(entry) or any("value" not in i for i in ring)


@settings(max_examples=200, deadline=None)
@given(write_sequences(), st.data())
def test_batching_law(writes: list, data: st.DataObject) -> None:
    """r(r(s, xs), ys) == r(s, xs + ys): merging a multi-key update equals merging key by key."""
    batches: list[dict] = []
    for key, value, turn in writes:
        write = {"value": value, "tool": "t", **({} if turn is None else {"turn": turn})}
        if batches and key not in batches[-1] and data.draw(st.booleans()):
            batches[-1][key] = write
        else:
            batches.append({key: write})
    one_by_one: dict = {}
    for batch in batches:
        for key, write in batch.items():
            one_by_one = merge_tool_state(one_by_one, {key: write})
    batched: dict = {}
    for batch in batches:
        batched = merge_tool_state(batched, batch)
    assert batched == one_by_one


@settings(max_examples=150, deadline=None)
@given(write_sequences())
def test_never_mutates_inputs_and_survives_serialization(writes: list) -> None:
    state: dict = {}
    serde = JsonPlusSerializer()
    for key, value, turn in writes:
        update = {key: {"value": value, "turn": turn, "tool": "t"}}
        before_state, before_update = copy.deepcopy(state), copy.deepcopy(update)
        new_state = merge_tool_state(state, update)
        assert state == before_state and update == before_update
        assert new_state is not state
        state = new_state
    reloaded = serde.loads_typed(serde.dumps_typed(state))
    assert json.dumps(reloaded, sort_keys=True) == json.dumps(state, sort_keys=True)
    assert merge_tool_state(reloaded, {}) == merge_tool_state(state, {})


# -- the rules, case by case --------------------------------------------------------------------


def test_seed_scenario() -> None:
    state = fold(
        [
            ("gazet/get_aoi/bbox", [12.4, 55.5, 12.7, 55.8], 1),
            ("gazet/get_aoi/bbox", [9.9, 56.1, 10.3, 56.2], 3),
        ]
    )
    entry = state["gazet/get_aoi/bbox"]
    assert (entry["versions"], entry["since"], entry["seq"]) == (2, 3, 2)
    assert value_at_turn(entry, 1) == RingHit([12.4, 55.5, 12.7, 55.8], since=1, until=2)
    assert value_at_turn(entry, 2).value == [12.4, 55.5, 12.7, 55.8]
    assert value_at_turn(entry, 3) == RingHit([9.9, 56.1, 10.3, 56.2], since=3, until=None)


def test_same_turn_rewrite_is_one_version_and_return_merges_back() -> None:
    state = fold([("k", "A", 1), ("k", "B", 2), ("k", "C", 2)])
    assert state["k"]["versions"] == 2 and state["k"]["value"] == "C"
    state = fold([("k", "A", 1), ("k", "B", 2), ("k", "A", 2)])
    assert state["k"]["versions"] == 1 and state["k"]["since"] == 1 and state["k"]["ring"] == []


def test_unchanged_republish_is_not_a_version_but_advances_seq_and_turn() -> None:
    state = fold([("k", {"a": 1, "b": 2}, 1), ("k", {"b": 2, "a": 1}, 4)])
    assert state["k"]["versions"] == 1
    assert (state["k"]["seq"], state["k"]["turn"], state["k"]["since"]) == (2, 4, 1)


def test_ring_bounds_count_and_bytes_and_says_when_it_no_longer_reaches_first() -> None:
    reducer = make_merge_tool_state(ring_size=2, ring_bytes=30)
    state = fold([("k", "x" * 10, t) for t in range(1, 2)], reducer)
    for turn, value in enumerate(["y" * 10, "z" * 20, "w" * 5, "v"], start=2):
        state = reducer(state, {"k": {"value": value, "turn": turn}})
    entry = state["k"]
    assert entry["versions"] == 5
    assert [i["turn"] for i in entry["ring"]] == [3, 4]
    assert [("value" in i) for i in entry["ring"]] == [True, True]  # 22 + 7 bytes fit in 30
    assert not ring_reaches_first(entry)
    assert value_at_turn(entry, 1) == RingMiss(oldest_in_ring=3)
    reducer = make_merge_tool_state(ring_size=2, ring_bytes=10)
    state = fold([("k", "x" * 20, 1), ("k", "y", 2), ("k", "z", 3)], reducer)
    assert [("value" in i) for i in state["k"]["ring"]] == [False, True]


def test_budget_evicts_ring_values_before_current_values() -> None:
    reducer = make_merge_tool_state(budget_bytes=250)
    state = fold([("a", "a" * 100, 1), ("a", "b" * 100, 2)], reducer)
    assert "value" in state["a"]["ring"][0]
    state = reducer(state, {"b": {"value": "c" * 60, "turn": 2}})
    assert "value" not in state["a"]["ring"][0]
    assert state["a"]["value"] == "b" * 100 and state["a"]["versions"] == 2
    state = reducer(state, {"c": {"value": "d" * 120, "turn": 3}})
    assert "value" not in state["a"]  # evicted, oldest write first; the entry stays
    assert state["a"]["versions"] == 2 and state["b"]["value"] == "c" * 60
    assert sum(e["bytes"] for e in entries_of(state).values()) <= 250
    assert state[CLOCK_KEY]["bytes"] == sum(e["bytes"] for e in entries_of(state).values())


def test_without_a_clock_an_unstamped_write_joins_the_newest_turn_and_keeps_the_tool() -> None:
    state = fold([("k", 1, 1), ("j", 5, 4)])
    state = merge_tool_state(state, {"k": {"value": 2}})
    assert (state["k"]["turn"], state["k"]["since"], state["k"]["tool"]) == (4, 4, "k")
    assert value_at_turn(state["k"], 3).value == 1
    older = merge_tool_state(state, {"k": {"value": 3, "turn": 2}})
    assert (
        older["k"]["turn"] == 4 and older["k"]["versions"] == 2
    )  # same-turn rewrite, not time travel


@pytest.mark.parametrize(
    ("update", "fragment"),
    [
        ({"k": 5}, "must be a dict with a 'value' field"),
        ({"k": {"tool": "x"}}, "must be a dict with a 'value' field"),
        ({"k": {"value": (1, 2)}}, "JSON data"),
        ({"k": {"value": object()}}, "JSON data"),
        ({"k": {"value": 1, "turn": -1}}, "turn"),
        ({"": {"value": 1}}, "non-empty strings"),
        ([("k", 1)], "must be a dict"),
    ],
)
def test_bad_writes_are_refused_clearly(update: Any, fragment: str) -> None:
    with pytest.raises(ToolStateError, match=fragment.replace("(", r"\(")):
        merge_tool_state({}, update)


def test_a_tool_state_that_is_not_a_dict_is_refused() -> None:
    with pytest.raises(ToolStateError, match="must be a dict"):
        merge_tool_state(["not", "a", "dict"], {"k": {"value": 1}})  # type: ignore[arg-type]


# -- with the turn clock ------------------------------------------------------------------------


@st.composite
def clocked_updates(draw: Any) -> list[dict[str, Any]]:
    """Updates as a clocked graph sends them: ticks, closes, and writes with or without stamps
    (stamps that disagree with the clock included), some several keys at once."""
    updates: list[dict[str, Any]] = []
    turn = 0
    for _ in range(draw(st.integers(1, 25))):
        kind = draw(st.sampled_from(["tick", "close", "write", "write", "write"]))
        if kind == "tick":
            turn += 1
            updates.append({CLOCK_KEY: {"turn": turn, "open": True, "message": f"m{turn}"}})
        elif kind == "close" and turn:
            updates.append({CLOCK_KEY: {"turn": turn, "open": False, "seen": f"a{turn}"}})
        else:
            keys = draw(st.lists(st.sampled_from(["a/t/x", "a/t/y"]), min_size=1, max_size=2))
            stamp = draw(st.none() | st.integers(0, turn + 2))
            updates.append({key: {"value": draw(pooled), "turn": stamp} for key in keys})
    return updates


@settings(max_examples=300, deadline=None)
@given(clocked_updates(), st.data())
def test_batching_law_with_the_clock(updates: list[dict[str, Any]], data: st.DataObject) -> None:
    """Folding updates one by one equals folding any regrouping of them, clock writes included;
    and the state is its own fixed point."""
    one_by_one: dict = {}
    for update in updates:
        for key, write in update.items():
            one_by_one = merge_tool_state(one_by_one, {key: write})
    regrouped: list[dict[str, Any]] = []
    for update in updates:
        for key, write in update.items():
            if regrouped and key not in regrouped[-1] and data.draw(st.booleans()):
                regrouped[-1][key] = write
            else:
                regrouped.append({key: write})
    batched: dict = {}
    for update in regrouped:
        batched = merge_tool_state(batched, update)
    assert batched == one_by_one
    assert merge_tool_state({}, batched) == batched
    assert merge_tool_state(batched, batched) == batched
    totals = batched.get(CLOCK_KEY, {})
    if totals:
        assert totals["bytes"] == sum(e["bytes"] for e in entries_of(batched).values())
        assert totals["seq"] == max((e["seq"] for e in entries_of(batched).values()), default=0)


def _two_turns() -> dict[str, Any]:
    state: dict[str, Any] = {}
    for turn, value in ((1, "A"), (2, "B")):
        state = merge_tool_state(
            state, {CLOCK_KEY: {"turn": turn, "open": True, "message": f"m{turn}"}}
        )
        state = merge_tool_state(state, {"k": {"value": value, "tool": "t"}})
        state = merge_tool_state(
            state, {CLOCK_KEY: {"turn": turn, "open": False, "seen": f"a{turn}"}}
        )
    return state


@pytest.mark.parametrize(
    ("corrupt", "fragment"),
    [
        (lambda e: e.update(versions=0), "versions"),
        (lambda e: e.update(seq=True), "seq"),
        (lambda e: e.update(since=-1), "since"),
        (lambda e: e.pop("digest"), "digest"),
        (lambda e: e["ring"][0].pop("seq"), "ring"),
        (lambda e: e["ring"][0].update(turn="1"), "ring"),
        (lambda e: e["ring"][0].update(turn=-1), "ring"),
        (lambda e: e.update(ring=[5]), "ring"),
    ],
)
def test_a_whole_tool_state_with_a_malformed_entry_is_refused(corrupt: Any, fragment: str) -> None:
    """A whole tool_state (a subgraph's, say) merges as itself only when each entry has the
    shape the reducer writes and every reader relies on."""
    whole = _two_turns()
    assert merge_tool_state({}, copy.deepcopy(whole)) == whole
    corrupt(whole["k"])
    with pytest.raises(ToolStateError, match=f"not one this reducer produced.*{fragment}"):
        merge_tool_state({}, whole)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_same_value_agrees_with_the_canonical_text(data: st.DataObject) -> None:
    """same_value is canonical equality without serializing: 1, 1.0, True and -0.0 apart."""
    from mcp_state_versions.state.versions import canonical, same_value

    leaves = st.sampled_from([0, 1, -1, 1.0, 0.0, -0.0, 2.5, True, False, None, "", "a", "1"])
    values = st.recursive(
        leaves,
        lambda inner: (
            st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("ab"), inner, max_size=2)
        ),
        max_leaves=6,
    )
    a, b = data.draw(values), data.draw(values)
    for x, y in ((a, b), (a, a), (a, json.loads(json.dumps(a)))):
        assert same_value(x, y) == (canonical(x)[0] == canonical(y)[0])


@settings(max_examples=2000, deadline=None)
@given(
    st.text()
    | st.text(alphabet=st.characters(max_codepoint=0x40))
    | st.text(alphabet=st.characters(categories=["Cs", "Ll"]))  # lone surrogates too
)
def test_a_text_s_canonical_json_is_the_standard_encoder_s(text: str) -> None:
    """A text's digest and size come from orjson, faster than the standard encoder: its bytes
    must be exactly those ``json.dumps`` gives (control characters, quotes, backslashes and
    every plane of Unicode alike), or a text stored before would read as a new version."""
    import hashlib

    from mcp_state_versions.state.versions import canonical

    try:
        standard = json.dumps(text, separators=(",", ":"), ensure_ascii=False).encode()
    except UnicodeEncodeError:  # a lone surrogate: refused either way
        with pytest.raises(UnicodeEncodeError):
            canonical(text)
        return
    assert canonical(text) == (hashlib.blake2b(standard, digest_size=12).hexdigest(), len(standard))


def test_a_whole_state_with_a_value_edited_in_place_is_a_write_of_it() -> None:
    """get_state, change a value, update_state with the whole: the edit takes effect as a
    write (never a silent no-op); untouched entries and a stale hand-back stay as they were."""
    state = merge_tool_state({}, {CLOCK_KEY: {"turn": 1, "open": True, "message": "m1"}})
    state = merge_tool_state(state, {"a/t/x": {"value": [1, 2]}, "a/t/y": {"value": "y"}})
    state = merge_tool_state(state, {CLOCK_KEY: {"turn": 1, "open": False}})
    edited = copy.deepcopy(state)
    edited["a/t/x"]["value"] = [1, 3]
    merged = merge_tool_state(state, edited)
    assert merged["a/t/x"]["value"] == [1, 3] and merged["a/t/x"]["versions"] == 2
    assert merged["a/t/x"]["since"] == 2  # set after turn 1 ended
    assert merged["a/t/y"] == state["a/t/y"]
    assert merge_tool_state(merged, edited) == merge_tool_state(merged, {})  # stale: kept
    assert merge_tool_state(merge_tool_state(state, edited), edited) == merged
