"""Publishing: keys, turn stamping, JSON conversion and the breadcrumb a tool leaves."""

from __future__ import annotations

import copy
import datetime
import re
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.prebuilt import ToolRuntime
from langgraph.types import Command
from pydantic import BaseModel
from pydantic_core import to_jsonable_python

from mcp_state_versions.agent.publish import BREADCRUMB_KEYS, publish, state_key, tool_state_writes
from mcp_state_versions.state.reducer import make_merge_tool_state, merge_tool_state

from ..conftest import runtime_for


class Place(BaseModel):
    name: str
    founded: datetime.date


def test_publish_stamps_the_turn_and_leaves_a_breadcrumb() -> None:
    state = {"messages": [HumanMessage("a"), AIMessage("b"), HumanMessage("c")], "tool_state": {}}
    command = publish(
        runtime_for(state),
        "gazet",
        "get_aoi",
        {"bbox": (1, 2, 3, 4), "place": Place(name="Aarhus", founded=datetime.date(770, 1, 1))},
        note="Aarhus",
    )
    writes: dict[str, Any] = command.update["tool_state"]
    assert writes == {
        "gazet/get_aoi/bbox": {"value": [1, 2, 3, 4], "tool": "get_aoi", "turn": 2},
        "gazet/get_aoi/place": {
            "value": {"name": "Aarhus", "founded": "0770-01-01"},
            "tool": "get_aoi",
            "turn": 2,
        },
    }
    (message,) = command.update["messages"]
    assert message.content == (
        "[state updated: gazet/get_aoi/bbox, gazet/get_aoi/place] "
        '{"bbox": [1, 2, 3, 4], "place": {"name": "Aarhus", "founded": "0770-01-01"}} Aarhus'
    )
    assert message.tool_call_id == "call-1"


def test_values_without_a_json_form_are_refused_by_field() -> None:
    with pytest.raises(TypeError, match="cannot publish field 'blob' of gazet/get_aoi"):
        tool_state_writes("gazet", "get_aoi", {"blob": object()}, turn=1)


@pytest.mark.parametrize(
    ("parts", "label"),
    [(("", "t", "f"), "toolset"), (("s", "a/b", "f"), "tool"), (("s", "t", ""), "field")],
)
def test_key_parts_are_checked(parts: tuple[str, str, str], label: str) -> None:
    with pytest.raises(ValueError, match=f"{label} must be a non-empty string without '/'"):
        state_key(*parts)


def test_publish_needs_a_field() -> None:
    with pytest.raises(ValueError, match="at least one field"):
        publish(runtime_for({"messages": []}), "s", "t", {})


def test_publish_into_a_state_without_the_channel_fails_loudly() -> None:
    """LangGraph drops an update to a channel the graph does not have, without a word."""
    from mcp_state_versions.state.reducer import ToolStateError

    with pytest.raises(ToolStateError, match="SessionStateMiddleware"):
        publish(runtime_for({"messages": [HumanMessage("a")]}), "t", "t", {"k": 1})


def _published(state: dict[str, Any], fields: dict[str, Any]) -> Any:
    command = publish(runtime_for(state), "t", "tool", fields, inline_limit=0)  # the breadcrumb
    return command.update.get("tool_state"), command.update["messages"][0].content


def test_an_unchanged_republish_is_not_written_again() -> None:
    state: dict[str, Any] = {"messages": [HumanMessage("a")], "tool_state": {}}
    writes, _ = _published(state, {"a": 1, "b": {"x": [1, 2]}, "c": True})
    state["tool_state"] = merge_tool_state({}, writes)
    # the same values (key order inside objects does not matter), one changed, 1 is not True
    writes, text = _published(state, {"a": 1, "b": {"x": [1, 2]}, "c": 1})
    assert list(writes) == ["t/tool/c"]
    assert text == "[state updated: t/tool/c] [unchanged: t/tool/a, t/tool/b]"
    writes, text = _published(state, {"a": 1})
    assert writes is None and text == "[unchanged: t/tool/a]"


def test_parallel_calls_to_one_tool_write_every_value() -> None:
    calls = [{"name": "tool", "id": "call-1", "args": {}}, {"name": "tool", "id": "c2", "args": {}}]
    state: dict[str, Any] = {"messages": [HumanMessage("a"), AIMessage("", tool_calls=calls)]}
    state["tool_state"] = merge_tool_state({}, {"t/tool/a": {"value": 1}})
    writes, text = _published(state, {"a": 1})
    assert list(writes) == ["t/tool/a"]  # call order decides which value stays
    assert "2 calls to tool in this step" in text


def test_the_breadcrumb_names_a_few_keys_and_counts_the_rest() -> None:
    state: dict[str, Any] = {"messages": [HumanMessage("a")], "tool_state": {}}
    writes, text = _published(state, {f"f{i:03}": i for i in range(500)})
    assert len(writes) == 500
    named = ", ".join(f"t/tool/f{i:03}" for i in range(BREADCRUMB_KEYS))
    assert text == f"[state updated: {named} + 495 more]"
    state["tool_state"] = merge_tool_state({}, writes)
    state["messages"].append(HumanMessage("b"))
    writes, text = _published(state, {f"f{i:03}": i + (i < 7) for i in range(500)})
    assert len(writes) == 7
    assert text.startswith(f"[state updated: {named} + 2 more — each replaces the value it held")
    assert text.endswith(
        "[unchanged: t/tool/f007, t/tool/f008, t/tool/f009, t/tool/f010, t/tool/f011 + 488 more]"
    )


def test_over_the_budget_the_values_just_written_stay_and_the_oldest_go() -> None:
    """A tool republishing everything with one value grown: the republished values are not
    written again, so the eviction the new value forces takes the oldest, not the new one."""
    reducer = make_merge_tool_state(ring_size=0, budget_bytes=3000)
    fields = {f"f{i}": "v" * 900 for i in range(3)}
    state: dict[str, Any] = {"messages": [HumanMessage("a")], "tool_state": {}}
    for turn in (1, 2):
        state["messages"].append(HumanMessage(f"turn {turn}"))
        writes, _ = _published(state, fields)
        state["tool_state"] = reducer(state["tool_state"], writes)
        fields = {**fields, "f2": "w" * 1500}  # the next turn rewrites f2, larger
    entries = state["tool_state"]
    assert "value" in entries["t/tool/f2"] and entries["t/tool/f2"]["value"] == "w" * 1500
    assert "value" not in entries["t/tool/f0"]  # the oldest write gave way
    assert "value" in entries["t/tool/f1"]


def _refine_tool() -> Any:
    from langchain_core.tools import tool

    @tool
    def refine(key: str, value: str, runtime: ToolRuntime) -> Any:
        """Another tool publishing under the same toolset and tool name as ``put``."""
        return publish(runtime, "ts", "put", {key: value})

    return refine


@pytest.mark.parametrize("wiring", ["build_agent", "create_agent"])
async def test_different_tools_writing_one_key_in_one_step_are_told(wiring: str) -> None:
    """put and refine both write ts/put/k in one step. The model's view of both replies
    says so and names whose value state kept (the later in call order)."""
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    from mcp_state_versions import build_agent
    from mcp_state_versions.demo.scripted import ScriptedChatModel, call

    from ..conversation import put

    seen: list[list[Any]] = []
    script = iter(
        [
            AIMessage(
                "",
                tool_calls=[
                    call("put", "c1", key="k", value="first"),
                    call("refine", "c2", key="k", value="second"),
                    call("put", "c3", key="j", value="alone"),
                ],
            ),
            AIMessage("done"),
        ]
    )

    def respond(messages: Any) -> AIMessage:
        seen.append(list(messages))
        return next(script)

    model = ScriptedChatModel(respond=respond)
    if wiring == "build_agent":
        agent = build_agent(model, [put, _refine_tool()])
    else:
        from langchain.agents import create_agent

        from mcp_state_versions import SessionStateMiddleware

        session = SessionStateMiddleware(messages="whole")
        agent = create_agent(model, [put, _refine_tool()], middleware=[session])
    state = await agent.ainvoke({"messages": [HumanMessage("write them")]})
    assert state["tool_state"]["ts/put/k"]["value"] == "second"
    replies = {m.tool_call_id: str(m.content) for m in seen[-1] if isinstance(m, ToolMessage)}
    assert "ts/put/k also by refine (call c2), state keeps refine's (call c2)" in replies["c1"]
    assert "ts/put/k also by put (call c1), state keeps this call's" in replies["c2"]
    assert "Other calls" not in replies["c3"]
    stored = {
        m.tool_call_id: str(m.content) for m in state["messages"] if isinstance(m, ToolMessage)
    }
    assert "Other calls" not in stored["c1"]  # the model's view is noted; state is not changed


def test_secret_named_fields_are_withheld_at_any_depth() -> None:
    from mcp_state_versions.agent.publish import withheld

    fields = {
        "user": "ann",
        "Password": "p",
        "config": {"API-Key": "k", "region": "eu", "nested": [{"access_token": "t"}]},
        "cookie_jar": "c",
    }
    kept, gone = withheld(fields)
    assert kept == {"user": "ann", "config": {"region": "eu", "nested": [{}]}}
    assert gone == ["Password", "config.API-Key", "config.nested[0].access_token", "cookie_jar"]
    assert withheld(fields, None) == (fields, [])
    assert withheld({"pin": 1}, r"pin") == ({}, ["pin"])


def test_names_matched_before_are_answered_the_same_past_the_memo_s_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Field names are matched once a pattern and remembered; the memo starts over past its
    bound, and its answers (a name that is not text is never secret) stay the same."""
    from mcp_state_versions.state.credentials import _SecretNames, withheld

    monkeypatch.setattr(_SecretNames, "MEMO", 3)
    fields = {"token": "t", 7: "seven", "a": 1, "b": 2, "c": {"password": "p", "d": 3}}
    first = withheld(fields, r"token|password")
    again = withheld(fields, r"token|password")  # every name now from the memo, cleared on the way
    assert first == again == ({7: "seven", "a": 1, "b": 2, "c": {"d": 3}}, ["token", "c.password"])


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
@pytest.mark.parametrize("wiring", ["publish", "capture"])
async def test_a_secrets_bytes_appear_nowhere_in_storage(
    kind: str, wiring: str, tmp_path: Any
) -> None:
    """A tool returns a password and a nested API key with its data, published by ``publish``
    or captured by the middleware. The reply says they were withheld, the data is stored,
    and the secrets' bytes are in no table, file or WAL."""
    from uuid import uuid4

    from langchain_core.messages import ToolMessage
    from langchain_core.tools import tool

    from mcp_state_versions import build_agent
    from mcp_state_versions.agent.build import run_turn
    from mcp_state_versions.demo.scripted import ScriptedChatModel, call

    from ..conftest import open_backend

    class Profile(BaseModel):
        name: str
        password: str

    password, key, inner = f"pw-{uuid4().hex}", f"sk-{uuid4().hex}", f"pm-{uuid4().hex}"
    result = {
        "user": "ann",
        "password": password,
        "config": {"api_key": key, "region": "eu"},
        "profile": {"owner": Profile(name="ann", password=inner)},  # a model inside a dict
    }

    @tool
    def login_publishing(runtime: ToolRuntime) -> Any:
        """Log in (publishes its result)."""
        return publish(runtime, "auth", "login", result)

    @tool
    def login(who: str) -> dict:
        """Log in (returns its result)."""
        return result

    script = [
        AIMessage("", tool_calls=[call(f"login{'_publishing' if wiring == 'publish' else ''}",
                                       "c1", **({} if wiring == "publish" else {"who": "ann"}))]),
        AIMessage("done"),
    ]  # fmt: skip
    async with await open_backend(kind, tmp_path) as saver:
        thread = f"secret-{uuid4().hex[:12]}"
        if wiring == "publish":
            agent = build_agent(
                ScriptedChatModel(replies=script), [login_publishing], checkpointer=saver
            )
        else:
            from langchain.agents import create_agent

            from mcp_state_versions import SessionStateMiddleware

            agent = create_agent(
                ScriptedChatModel(replies=script),
                [login],
                middleware=[SessionStateMiddleware(toolset="auth", messages="whole")],
                checkpointer=saver,
            )
        state = await run_turn(agent, thread, "log in")
        reply = next(str(m.content) for m in state["messages"] if isinstance(m, ToolMessage))
        assert "[withheld: auth/login/password, auth/login/config.api_key" in reply, reply
        assert state["tool_state"]["auth/login/user"]["value"] == "ann"
        assert state["tool_state"]["auth/login/config"]["value"] == {"region": "eu"}
        assert state["tool_state"]["auth/login/profile"]["value"] == {"owner": {"name": "ann"}}
        assert "auth/login/profile.owner.password" in reply
        for secret in (password, key, inner):
            assert secret not in reply
            if kind == "sqlite":
                for path in tmp_path.glob("t.sqlite*"):
                    assert secret.encode() not in path.read_bytes(), path.name
            else:
                async with saver._cursor() as cursor:
                    for table, column in [
                        ("checkpoints", "checkpoint::text || metadata::text"),
                        ("checkpoint_blobs", "encode(coalesce(blob, ''::bytea), 'escape')"),
                        ("checkpoint_writes", "encode(blob, 'escape')"),
                    ]:
                        await cursor.execute(
                            f"SELECT count(*) AS n FROM {table} "
                            f"WHERE thread_id = %s AND position(%s in {column}) > 0",
                            (thread, secret),
                        )
                        assert (await cursor.fetchone())["n"] == 0, table


def test_a_published_write_is_merged_without_serializing_its_value_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import mcp_state_versions.state.reducer as state_module
    from mcp_state_versions.state.reducer import ToolStateError
    from mcp_state_versions.state.versions import canonical

    state: dict[str, Any] = {"messages": [HumanMessage("a")], "tool_state": {}}
    big = "x" * 5000
    writes = publish(runtime_for(state), "t", "tool", {"big": big, "small": [1, 2]}).update[
        "tool_state"
    ]
    serialized: list[Any] = []
    monkeypatch.setattr(
        state_module, "canonical", lambda value: serialized.append(value) or canonical(value)
    )
    merged = merge_tool_state({}, writes)
    assert serialized == []  # publish computed both identities; the merge took them
    for key, value in (("t/tool/big", big), ("t/tool/small", [1, 2])):
        assert (merged[key]["digest"], merged[key]["size"]) == canonical(value)
    # An equal write that publish did not build is checked as before: a wrong claim is refused,
    # and a right one costs a serialization.
    forged = {"t/tool/big": {**writes["t/tool/big"], "value": "y" * 5000}}
    with pytest.raises(ToolStateError, match="does not match its value"):
        merge_tool_state({}, forged)
    merge_tool_state({}, {"t/tool/big": dict(writes["t/tool/big"])})
    assert serialized == ["y" * 5000, big]
    # A deep copy of what publish built (as ToolNode makes of a tool's Command) keeps a text
    # value itself, which is taken as vouched; a copied list is serialized again.
    writes = publish(runtime_for(state), "t", "tool", {"big": big, "small": [1, 2]}).update[
        "tool_state"
    ]
    serialized.clear()
    merged = merge_tool_state({}, copy.deepcopy(writes))
    assert serialized == [[1, 2]]
    assert (merged["t/tool/big"]["digest"], merged["t/tool/big"]["size"]) == canonical(big)


def test_vouched_writes_never_merged_give_way_past_the_limit() -> None:
    from mcp_state_versions.state.reducer import _Vouched

    vouched = _Vouched()
    vouched.LIMIT = 10
    first, second, third = ({"value": [n]} for n in range(3))
    for write in (first, second, third):
        vouched.vouch(write, ("d", 4))
    assert vouched.take(first) == (None, False)  # the oldest gave way: 12 bytes over the limit
    assert vouched.take(second) == (("d", 4), True)
    assert vouched.take({"value": third["value"]}) == (("d", 4), False)  # a copy of its write
    assert vouched.take(second) == (None, False)  # taken once


@given(
    st.one_of(st.text(), st.integers(), st.floats(), st.booleans(), st.none(), st.integers(10**30))
)
def test_a_scalar_is_stored_as_pydantic_would_convert_it(value: Any) -> None:
    """Text, numbers, booleans and null skip the conversion to JSON data (most published
    fields are such): what is stored must be what the conversion gives, NaN included."""
    stored = tool_state_writes("t", "tool", {"f": value}, turn=1)["t/tool/f"]["value"]
    converted = to_jsonable_python(value)
    assert type(stored) is type(converted)
    assert stored == converted or (stored != stored and converted != converted)  # NaN


_NAMES = st.sampled_from(["a", "b", "token", "api_key", "Region", "x.y", "cookie", "n"])
_JSON = st.recursive(
    # few leaves, so a value republished often meets one equal to it by ``==`` alone
    st.one_of(st.sampled_from([0, 1, True, False, 1.0, 0.0, -0.0, None, "1", ""]), st.text()),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(_NAMES, inner, max_size=3),
        st.tuples(inner, inner),
    ),
    max_leaves=8,
)


@given(
    held=st.dictionaries(_NAMES, _JSON, max_size=5),
    fields=st.dictionaries(_NAMES, _JSON, min_size=1, max_size=6),
    parallel=st.booleans(),
    secret_names=st.sampled_from([None, r"token|apikey|cookie", r"region"]),
)
@example(held={"a": True}, fields={"a": 1}, parallel=False, secret_names=None)
@example(held={"a": {"n": 1}}, fields={"a": {"n": 1}, "b": "x"}, parallel=False, secret_names=None)
def test_one_pass_publication_is_the_three_steps_it_folds(
    held: dict[str, Any], fields: dict[str, Any], parallel: bool, secret_names: str | None
) -> None:
    """``publication_of`` withholds, converts and compares in one pass; what it gives (the
    stored writes, the breadcrumb, the identities, the fields kept) must be what withholding,
    then building every write, then :func:`publication` give, over values held or not, equal
    or not (``1`` and ``True``, a tuple and its list), nested secrets and parallel calls."""
    from mcp_state_versions.agent.publish import publication, publication_of, withheld

    calls = [{"name": "tool", "id": "call-1", "args": {}}]
    if parallel:
        calls.append({"name": "tool", "id": "c2", "args": {}})
    state: dict[str, Any] = {"messages": [HumanMessage("a")], "tool_state": {}}
    state["tool_state"] = merge_tool_state({}, _published(state, held)[0] if held else None)
    state["messages"].append(AIMessage("", tool_calls=calls))
    state["messages"].append(HumanMessage("b"))
    runtime = runtime_for(state)

    one_pass = publication_of("t", "tool", fields, runtime, secret_names=secret_names)
    kept, gone = withheld(fields, secret_names)
    writes = tool_state_writes("t", "tool", kept, turn=2)
    steps = publication(writes, runtime, withheld=[f"t/tool/{path}" for path in gone])
    assert one_pass.writes == steps.writes
    assert one_pass.text == steps.text
    assert one_pass.identities == steps.identities
    assert one_pass.fields == to_jsonable_python(kept)  # as stored: JSON data


def _nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    inner = value
    for _ in range(depth - 1):
        inner["a"] = {}
        inner = inner["a"]
    return value


def test_a_value_deeper_than_a_checkpoint_stores_is_refused_when_published() -> None:
    from mcp_state_versions.agent.publish import MAX_DEPTH, ValueTooDeep

    runtime = runtime_for({"messages": [HumanMessage("a")], "tool_state": {}})
    publish(runtime, "ts", "t", {"ok": _nested(MAX_DEPTH)})
    for depth in (MAX_DEPTH + 1, 300, 5000):
        with pytest.raises(ValueTooDeep, match=f"nested more than {MAX_DEPTH} levels deep"):
            publish(runtime, "ts", "t", {"deep": _nested(depth)})


@pytest.mark.parametrize("depth", [255, 300, 5000])
@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def test_capture_of_a_too_deep_result_stores_nothing_and_the_run_goes_on(
    kind: str, depth: int, tmp_path: Any
) -> None:
    """A tool returning a result nested past what a checkpoint can store: the run ends as
    usual, nothing of it is stored, and the model is told why; a result at the limit is
    stored and reads back."""
    from uuid import uuid4

    from langchain_core.messages import ToolMessage
    from langchain_core.tools import tool

    from mcp_state_versions import build_agent
    from mcp_state_versions.agent.build import run_turn
    from mcp_state_versions.agent.publish import MAX_DEPTH
    from mcp_state_versions.demo.scripted import ScriptedChatModel, call

    from ..conftest import open_backend

    @tool
    def tree(size: int) -> dict:
        """Return a tree ``size`` levels deep."""
        return {"tree": _nested(size), "ok": 1}

    script = [
        AIMessage("", tool_calls=[call("tree", "c1", size=depth)]),
        AIMessage("noted"),
        AIMessage("", tool_calls=[call("tree", "c2", size=MAX_DEPTH)]),
        AIMessage("noted"),
    ]
    async with await open_backend(kind, tmp_path) as saver:
        agent = build_agent(ScriptedChatModel(replies=script), [tree], checkpointer=saver)
        thread = f"deep-{uuid4().hex[:12]}"
        state = await run_turn(agent, thread, "grow one")
        reply = next(m for m in state["messages"] if isinstance(m, ToolMessage))
        assert str(reply.content).startswith("[state not updated: cannot publish field 'tree'")
        assert "tools/tree/tree" not in state["tool_state"]
        state = await run_turn(agent, thread, "grow one at the limit")
        assert state["tool_state"]["tools/tree/tree"]["value"] == _nested(MAX_DEPTH)
        reread = await agent.aget_state({"configurable": {"thread_id": thread}})
        assert reread.values["tool_state"]["tools/tree/tree"]["value"] == _nested(MAX_DEPTH)


@pytest.mark.parametrize(
    "name",
    [
        "passphrase", "access_key", "OPENAI_KEY", "pwd", "ssh_priv", "bearer", "session_id",
        "jwt", "API~KEY", "p\u0430ssword", "\uff50\uff41\uff53\uff53\uff57\uff4f\uff52\uff44",
        "api\u200bkey", "Pass-Word", "x_auth_token", "userPassword",
    ],
)  # fmt: skip
def test_secret_names_are_matched_as_read(name: str) -> None:
    """Lookalike letters, fullwidth forms, invisible characters and odd separators do not
    hide a credential's name; the widened list covers the names attacks used."""
    from mcp_state_versions.agent.publish import withheld

    assert withheld({name: "s3cr3t", "region": "eu"}) == ({"region": "eu"}, [name])


@pytest.mark.parametrize("name", ["key", "primary_key", "monkey", "keyboard", "session", "Ünïcode"])
def test_ordinary_names_are_kept(name: str) -> None:
    from mcp_state_versions.agent.publish import withheld

    assert withheld({name: 1}) == ({name: 1}, [])


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def test_a_tool_s_own_command_writing_a_secret_is_refused_before_it_is_stored(
    kind: str, tmp_path: Any
) -> None:
    """A tool that writes tool_state itself (a Command, not publish) with a credential nested
    in its value: the call fails with a ToolStateError naming the field, and the secret's bytes
    are in no file or table."""
    from uuid import uuid4

    from langchain_core.messages import ToolMessage
    from langchain_core.tools import tool

    from mcp_state_versions import build_agent
    from mcp_state_versions.agent.build import run_turn
    from mcp_state_versions.demo.scripted import ScriptedChatModel, call
    from mcp_state_versions.state.reducer import ToolStateError

    from ..conftest import open_backend

    secret = f"sk-{uuid4().hex}"

    @tool
    def raw(runtime: ToolRuntime) -> Command:
        """Write tool_state by hand."""
        return Command(
            update={
                "tool_state": {"ops/raw/cfg": {"value": {"region": "eu", "API~KEY": secret}}},
                "messages": [ToolMessage("done", tool_call_id=runtime.tool_call_id)],
            }
        )

    script = [AIMessage("", tool_calls=[call("raw", "c1")]), AIMessage("ok")]
    async with await open_backend(kind, tmp_path) as saver:
        agent = build_agent(ScriptedChatModel(replies=script), [raw], checkpointer=saver)
        thread = f"gate-{uuid4().hex[:12]}"
        with pytest.raises(ToolStateError, match="API~KEY, named like a credential"):
            await run_turn(agent, thread, "write it")
        if kind == "sqlite":
            for path in tmp_path.glob("t.sqlite*"):
                assert secret.encode() not in path.read_bytes(), path.name
        else:
            async with saver._cursor() as cursor:
                await cursor.execute(
                    "SELECT count(*) AS n FROM checkpoint_writes WHERE thread_id = %s "
                    "AND position(%s in encode(blob, 'escape')) > 0",
                    (thread, secret),
                )
                assert (await cursor.fetchone())["n"] == 0


@pytest.mark.parametrize(
    "kind", ["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
async def test_an_operator_edit_holding_a_secret_is_refused_before_it_is_stored(
    kind: str, tmp_path: Any
) -> None:
    """An operator's ``update_state`` of ``tool_state`` (one key named like a credential, a
    nested ``api_key``, a whole state edited in place, an ``Overwrite``) is refused by the
    library's saver with a ToolStateError naming the field, before anything is stored: the
    secret's bytes are in no file, table or in-memory store. An edit without one goes in."""
    import pickle
    from uuid import uuid4

    from langchain_core.messages import HumanMessage
    from langgraph.types import Overwrite

    from mcp_state_versions.state.reducer import ToolStateError

    from ..conftest import open_backend
    from ..conversation import PUT, agent_graph

    secret = f"sk-{uuid4().hex}"
    async with await open_backend(kind, tmp_path) as saver:
        graph = agent_graph(saver, 8)
        config = {"configurable": {"thread_id": f"ops-{uuid4().hex[:12]}"}}
        await graph.ainvoke({"messages": [HumanMessage("put a=1")]}, config)
        whole = (await graph.aget_state(config)).values["tool_state"]
        edited = {**whole, PUT + "a": {**whole[PUT + "a"], "value": {"api_key": secret}}}
        for update, named in [
            ({"ops/edit/password": {"value": secret}}, "ops/edit/password"),
            ({"ops/edit/cfg": {"value": {"region": "eu", "nested": {"api_key": secret}}}},
             "ops/edit/cfg.nested.api_key"),
            (edited, f"{PUT}a.api_key"),
            (Overwrite({PUT + "a": {"token": secret}}), f"{PUT}a.token"),
        ]:  # fmt: skip
            with pytest.raises(ToolStateError, match=f"{re.escape(named)}, named like a cred"):
                await graph.aupdate_state(config, {"tool_state": update}, as_node="tools")
        await graph.aupdate_state(
            config, {"tool_state": {"ops/edit/region": {"value": "eu"}}}, as_node="tools"
        )
        values = (await graph.aget_state(config)).values["tool_state"]
        assert values["ops/edit/region"]["value"] == "eu" and values[PUT + "a"]["value"] == "1"
        if kind == "memory":
            stored = pickle.dumps(
                ([dict(inner) for inner in saver.storage.values()], dict(saver.writes),
                 dict(saver.blobs))
            )  # fmt: skip
            assert secret.encode() not in stored
        elif kind == "sqlite":
            for path in tmp_path.glob("t.sqlite*"):
                assert secret.encode() not in path.read_bytes(), path.name
        else:
            async with saver._cursor() as cursor:
                await cursor.execute(
                    "SELECT count(*) AS n FROM checkpoint_writes WHERE thread_id = %s "
                    "AND position(%s in encode(blob, 'escape')) > 0",
                    (config["configurable"]["thread_id"], secret),
                )
                assert (await cursor.fetchone())["n"] == 0


class _CallsTools:
    """Not a message, yet with ``tool_calls``: asked one by one."""

    def __init__(self, calls: Any) -> None:
        self.tool_calls = calls


def _message(kind: str, calls: int) -> Any:
    from langchain_core.messages import AIMessageChunk, SystemMessage, ToolMessage

    from mcp_state_versions.demo.scripted import call

    made = [call("put", f"c{i}", key="k", value=i) for i in range(calls)]
    return {
        "ai": lambda: AIMessage("", tool_calls=made),
        "chunk": lambda: AIMessageChunk(
            content="",
            tool_call_chunks=[{**c, "args": "{}", "index": i} for i, c in enumerate(made)],
        ),
        "broken ai": lambda: AIMessage.model_construct(content="", tool_calls=None),
        "human": lambda: HumanMessage("hi"),
        "tool": lambda: ToolMessage("done", tool_call_id="c0"),
        "system": lambda: SystemMessage("be brief"),
        "dict": lambda: {"role": "ai", "tool_calls": made},
        "object": lambda: _CallsTools(made),
        "object without a list": lambda: _CallsTools(len(made)),
    }[kind]()


@given(
    st.lists(
        st.tuples(
            st.sampled_from(
                [
                    "ai",
                    "chunk",
                    "broken ai",
                    "human",
                    "tool",
                    "system",
                    "dict",
                    "object",
                    "object without a list",
                ]
            ),
            st.integers(0, 3),
        ),
        max_size=12,
    )
)
def test_messages_calling_several_tools_are_found_whatever_else_the_list_holds(shape: Any) -> None:
    """The look for messages calling several tools skips messages by their type, and asks
    anything else for its ``tool_calls``: it finds what asking every one finds, whatever the
    list holds."""
    from mcp_state_versions.storage.messages import calling_several

    messages = [_message(kind, calls) for kind, calls in shape]
    expected = tuple(
        i
        for i, m in enumerate(messages)
        if isinstance(getattr(m, "tool_calls", None), list | tuple) and len(m.tool_calls) > 1
    )
    assert calling_several(messages) == expected


def test_a_publish_shows_its_small_values_as_a_captured_result_does() -> None:
    """The breadcrumb, then the fields' JSON within ``inline_limit`` (as capture does), then
    the note; a large value, or ``inline_limit=0``, leaves the JSON out."""
    from mcp_state_versions.agent.publish import DEFAULT_INLINE_LIMIT

    runtime = runtime_for({"messages": [], "tool_state": {}})
    small = publish(runtime, "trip", "budget", {"amount": 1200, "currency": "EUR"}, note="ok")
    text = small.update["messages"][0].content
    assert text == (
        '[state updated: trip/budget/amount, trip/budget/currency] {"amount": 1200, '
        '"currency": "EUR"} ok'
    )
    large = publish(runtime, "trip", "budget", {"notes": "x" * (DEFAULT_INLINE_LIMIT + 1)})
    assert large.update["messages"][0].content == "[state updated: trip/budget/notes]"
    quiet = publish(runtime, "trip", "budget", {"amount": 1}, inline_limit=0)
    assert quiet.update["messages"][0].content == "[state updated: trip/budget/amount]"


def test_capture_on_a_graph_without_tool_state_fails_as_publish_does() -> None:
    """A ``StateGraph(MessagesState)`` with the session wrappers: LangGraph would drop the
    capture's write without a trace, so the call fails, naming what to use instead."""
    from langchain_core.tools import tool
    from langgraph.graph import END, START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode

    from mcp_state_versions import AUTO, ToolStateError, call
    from mcp_state_versions.agent.capture import Capture, session_tool_wrappers

    @tool
    def find_hotel(city: str) -> dict[str, Any]:
        """A hotel in a city."""
        return {"name": "Lune", "price": 90}

    wrap, awrap = session_tool_wrappers(AUTO, Capture())
    graph = StateGraph(MessagesState)
    graph.add_node("tools", ToolNode([find_hotel], wrap_tool_call=wrap, awrap_tool_call=awrap))
    graph.add_edge(START, "tools")
    graph.add_edge("tools", END)
    app = graph.compile()
    asked = AIMessage("", tool_calls=[call("find_hotel", "h1", city="Oslo")])
    with pytest.raises(ToolStateError, match="no tool_state channel"):
        app.invoke({"messages": [HumanMessage("hotel?"), asked]})


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
        lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
        max_leaves=20,
    ),
    st.integers(0, 400),
)
def test_a_result_is_called_too_long_only_when_its_json_is(value: Any, limit: int) -> None:
    """The early count never calls a result too long to show when its JSON fits."""
    from mcp_state_versions.agent.publish import _longer_than
    from mcp_state_versions.wording.render import dumps

    if _longer_than(value, limit):
        assert len(dumps(value)) > limit
