"""The HTTP API through a real ASGI client, on every backend; it agrees with inspect_state."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from langchain_core.messages import HumanMessage
from starlette.applications import Starlette
from starlette.routing import Mount

from mcp_state_versions.agent.build import run_turn
from mcp_state_versions.agent.inspect_state import make_inspect_state
from mcp_state_versions.api import create_app
from mcp_state_versions.retention.prune import prune_thread
from mcp_state_versions.savers.memory import PruningInMemorySaver
from mcp_state_versions.walk.checkpoints import CheckpointHistory
from mcp_state_versions.walk.history import outcome
from mcp_state_versions.walk.resolve import resolve_turn, versioned_entries
from mcp_state_versions.wording.answers import describe_answer, status_line

from ..conftest import runtime_for
from ..helpers import BBOX, agent_on, fork_at

KEYS = [BBOX, "gazet/get_aoi/name", "gazet/get_aoi/country"]


async def forked_pruned_thread(saver: Any, thread_id: str) -> Any:
    """Copenhagen, chat, Aarhus; fork at turn 1 to Oslo; three more turns; keep the last 3."""
    agent = agent_on(saver, ring_size=1)
    for text in ["chat", "find Copenhagen", "chat", "find Aarhus"]:
        await run_turn(agent, thread_id, text)
    await fork_at(agent, thread_id, 2, "find Oslo")
    for text in ["find Aarhus", "find Copenhagen", "find Oslo"]:
        await run_turn(agent, thread_id, text)
    await prune_thread(saver, thread_id, keep_turns=3, drop_abandoned=True)
    return agent


def client(app: Any, token: str | None = None) -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://test", headers=headers
    )


async def test_routes_and_the_tool_agree_on_every_key_and_turn(saver: Any, thread_id: str) -> None:
    agent = await forked_pruned_thread(saver, thread_id)
    state = (await agent.aget_state({"configurable": {"thread_id": thread_id}})).values
    history = CheckpointHistory(saver)
    tool = make_inspect_state(history=history)
    entries = versioned_entries(state["tool_state"])
    seen: set[int] = set()
    async with client(create_app(saver)) as http:
        for key in KEYS:
            for turn in range(1, 8):
                response = await http.get(
                    f"/threads/{thread_id}/state/{key}", params={"turn": turn}
                )
                text = await tool.ainvoke(
                    {"key": key, "turn": turn, "runtime": runtime_for(state, thread_id)}
                )
                answer = await resolve_turn(
                    entries, key, turn, current_turn=6, history=history, thread_id=thread_id
                )
                seen.add(response.status_code)
                # One resolution, worded for each reader: the model, and a person over HTTP.
                assert text == describe_answer(answer, keys=list(entries))
                if response.status_code == 200:
                    assert text.endswith("\n" + json.dumps(response.json()["value"]))
                else:
                    assert response.json()["code"] == outcome(answer).code
                    assert response.json()["detail"] == status_line(answer, keys=list(entries))
    assert seen == {200, 404, 410}


async def test_status_codes_and_bodies(saver: Any, thread_id: str) -> None:
    await forked_pruned_thread(saver, thread_id)
    async with client(create_app(saver)) as http:
        base = f"/threads/{thread_id}"
        listing = (await http.get(f"{base}/state")).json()
        assert listing["turn"] == 6
        bbox = next(k for k in listing["keys"] if k["key"] == BBOX)
        assert bbox["shape"] == "list[4] of 10.6" and bbox["versions"] >= 4

        current = (await http.get(f"{base}/state/{BBOX}")).json()
        assert current["value"] == [10.6, 59.8, 10.9, 60.0] and current["source"] == "current"

        never = await http.get(f"{base}/state/{BBOX}", params={"turn": 9})
        assert never.status_code == 404
        assert never.json()["code"] == "turn_never_happened"
        assert never.json()["total"] == 6

        gone = await http.get(f"{base}/state/{BBOX}", params={"turn": 1})
        assert gone.status_code == 410
        assert gone.json()["retained"] == {"first": 4, "last": 6}

        old = await http.get(f"{base}/state/{BBOX}", params={"turn": 4})
        assert old.status_code == 200 and old.json()["value"] == [9.9, 56.1, 10.3, 56.2]

        for bad in ("0", "-1", "x", "1.5", str(2**63)):
            assert (await http.get(f"{base}/state/{BBOX}", params={"turn": bad})).status_code == 422

        unknown = await http.get(f"{base}/state/gazet/get_aoi/bbx")
        assert unknown.status_code == 404 and unknown.json()["code"] == "unknown_key"
        assert (await http.get("/threads/nope/state")).json()["code"] == "unknown_thread"

        versions = (await http.get(f"{base}/state/{BBOX}/versions")).json()
        assert versions["items"][-1]["current"] and versions["items"][-1]["value"] == [
            10.6,
            59.8,
            10.9,
            60.0,
        ]
        items = versions["items"]
        assert sum(item["count"] for item in items) == versions["versions"]
        # Turns 1–3 were pruned: what they held before the ring begins is one row saying so.
        assert items[0]["status"] == "pruned" and items[0]["until"] == items[1]["since"] - 1, items
        assert all(item["status"] == "kept" for item in items[1:]), items

        turns = (await http.get(f"{base}/turns")).json()
        assert turns == {"thread_id": thread_id, "total": 6, "retained": {"first": 4, "last": 6}}


async def test_key_not_set_yet_has_its_own_code() -> None:
    saver = PruningInMemorySaver()
    agent = agent_on(saver)
    for text in ["chat", "find Oslo"]:
        await run_turn(agent, "t", text)
    async with client(create_app(saver)) as http:
        response = await http.get(f"/threads/t/state/{BBOX}", params={"turn": 1})
    assert response.status_code == 404
    assert response.json()["code"] == "key_not_set_yet"


async def test_a_field_named_versions_is_still_readable() -> None:
    saver = PruningInMemorySaver()
    await saver.aput(
        {"configurable": {"thread_id": "t", "checkpoint_ns": ""}},
        {
            "v": 4,
            "id": "1",
            "ts": "2026-12-01T00:00:00+00:00",
            "versions_seen": {},
            "channel_versions": {"messages": 1, "tool_state": 1},
            "channel_values": {
                "messages": [HumanMessage("x")],
                "tool_state": {
                    "s/t/versions": {
                        "value": 3,
                        "tool": "t",
                        "seq": 1,
                        "turn": 1,
                        "since": 1,
                        "versions": 1,
                        "ring": [],
                        "digest": "d",
                        "size": 1,
                        "bytes": 1,
                    }
                },
            },
        },
        {"source": "loop", "step": 1},
        {"messages": 1, "tool_state": 1},
    )
    async with client(create_app(saver)) as http:
        response = await http.get("/threads/t/state/s/t/versions")
    assert response.status_code == 200 and response.json()["value"] == 3


async def test_bearer_token_and_authorize_hook(monkeypatch: pytest.MonkeyPatch) -> None:
    saver = PruningInMemorySaver()
    await run_turn(agent_on(saver), "mine", "find Oslo")
    await run_turn(agent_on(saver), "theirs", "find Oslo")
    app = create_app(saver, token="s3cret", authorize=lambda request, thread: thread == "mine")
    async with client(app) as anonymous:
        missing = await anonymous.get("/threads/mine/state")
        assert missing.status_code == 401 and missing.headers["www-authenticate"] == "Bearer"
    async with client(app, "wrong") as wrong:
        assert (await wrong.get("/threads/mine/state")).status_code == 401
    async with client(app, "s3cret") as good:
        assert (await good.get("/threads/mine/state")).status_code == 200
        assert (await good.get("/threads/theirs/state")).status_code == 403

    async def deny(request: Any, thread: str) -> bool:
        return False

    monkeypatch.setenv("MCP_STATE_VERSIONS_API_TOKEN", "from-env")
    async with client(create_app(saver, authorize=deny), "from-env") as env:
        assert (await env.get("/threads/mine/turns")).status_code == 403
    async with client(create_app(saver), "from-env") as env:
        assert (await env.get("/threads/mine/turns")).status_code == 200


async def test_openapi_schema_is_published() -> None:
    async with client(create_app(PruningInMemorySaver())) as http:
        schema = (await http.get("/openapi.json")).json()
    assert "/threads/{thread_id}/state/{key}" in schema["paths"]
    read = schema["paths"]["/threads/{thread_id}/state/{key}"]["get"]
    assert {"200", "404", "410", "422"} <= set(read["responses"])


async def test_ids_no_store_can_hold_are_unknown_threads_not_server_errors(
    saver: Any, thread_id: str
) -> None:
    await forked_pruned_thread(saver, thread_id)
    async with client(create_app(saver)) as http:
        for path in ["/threads/%00/state", "/threads/a%00b/turns", "/threads/%ED%A0%80/state"]:
            response = await http.get(path)
            assert response.status_code == 404, (path, response.text)
            assert response.json()["code"] == "unknown_thread"
        response = await http.get(f"/threads/{thread_id}/state", params={"namespace": "\x00"})
        assert response.status_code == 404
        assert (await http.get("/threads/" + "x" * 5000 + "/state")).status_code == 422


async def test_a_field_named_versions_is_read_as_of_the_turn_asked(thread_id: str) -> None:
    from ..conversation import agent_graph

    saver = PruningInMemorySaver()
    agent = agent_graph(saver, 8)
    config = {"configurable": {"thread_id": thread_id}}
    for text in ["put versions=first", "put versions=second"]:
        await agent.ainvoke({"messages": [HumanMessage(text)]}, config)
    async with client(create_app(saver)) as http:
        then = await http.get(f"/threads/{thread_id}/state/ts/put/versions", params={"turn": 1})
        assert then.status_code == 200 and then.json()["value"] == "first"
        assert then.json()["turn"] == 1
        now = await http.get(f"/threads/{thread_id}/state/ts/put/versions")
        assert now.json()["value"] == "second"


async def test_a_repeated_turn_is_refused(thread_id: str) -> None:
    saver = PruningInMemorySaver()
    await forked_pruned_thread(saver, thread_id)
    async with client(create_app(saver)) as http:
        response = await http.get(f"/threads/{thread_id}/state/{BBOX}?turn=1&turn=2")
        assert response.status_code == 422
        assert response.json()["code"] == "repeated_turn"
        listing = await http.get(f"/threads/{thread_id}/state/{BBOX}/versions?turn=1&turn=2")
        assert listing.status_code == 422 and listing.json()["code"] == "repeated_turn"


def _rows(items: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(i["since"], i["until"], i["status"], i["count"], i["value"]) for i in items]


async def test_versions_come_in_pages_and_as_they_stood_at_a_turn(
    saver: Any, thread_id: str
) -> None:
    """A key rewritten every turn has as many versions as turns (10,000 on a long thread),
    each beyond the ring a history read: ``/versions`` lists the newest ``limit``, and
    ``next_turn`` names the page before, which is the list as it stood at that turn's end.
    The pages put together are the whole list; ``?turn=N`` is the list as it stood then."""
    from mcp_state_versions.walk.resolve import VersionRow, as_of

    from ..conversation import agent_graph

    agent = agent_graph(saver, 2)
    config = {"configurable": {"thread_id": thread_id}}
    for turn in range(1, 13):
        text = "chat" if turn in (4, 9) else f"put k=v{turn}"
        await agent.ainvoke({"messages": [HumanMessage(text)]}, config)
    url = f"/threads/{thread_id}/state/ts/put/k/versions"
    async with client(create_app(saver)) as http:
        whole = (await http.get(url)).json()
        assert whole["versions"] == 10 and whole["next_turn"] is None
        assert [i["value"] for i in whole["items"]] == [
            f"v{t}" for t in range(1, 13) if t not in (4, 9)
        ]
        pages, turn = [], None
        while True:
            params = {"limit": 3} | ({} if turn is None else {"turn": turn})
            page = (await http.get(url, params=params)).json()
            assert page["as_of_turn"] == turn
            listed = [i for i in page["items"] if i["status"] != "unlisted"]
            assert len(listed) <= 3
            pages.insert(0, listed)
            if page["next_turn"] is None:
                break
            unlisted = page["items"][0]
            assert unlisted["status"] == "unlisted" and unlisted["until"] == page["next_turn"]
            assert unlisted["count"] == page["versions"] - len(listed)
            turn = page["next_turn"]
        stitched = [item for page in pages for item in page]
        # The newest row of an older page is the version current as that turn ended.
        for earlier, later in itertools.pairwise(stitched):
            if earlier["until"] is None:
                earlier["until"], earlier["current"] = later["since"] - 1, False
        assert _rows(stitched) == _rows(whole["items"])
        rows = [
            VersionRow(**{k: v for k, v in i.items() if k != "current"}) for i in whole["items"]
        ]
        for turn in range(1, 12):
            then = (await http.get(url, params={"turn": turn})).json()
            assert then["as_of_turn"] == turn
            expected = [row.as_dict() for row in as_of(rows, turn)]
            assert _rows(then["items"]) == _rows(expected), turn
        never = await http.get(url, params={"turn": 13})
        assert never.status_code == 404 and never.json()["code"] == "turn_never_happened"
        for bad in ("0", "1001"):
            assert (await http.get(url, params={"limit": bad})).status_code == 422
        await prune_thread(saver, thread_id, keep_turns=4)
        gone = await http.get(url, params={"turn": 2})
        assert gone.status_code == 410 and gone.json()["code"] == "turn_not_retained"
        # Turn 11 pruned, its value still in the key's ring: the list as the ring knows it.
        await prune_thread(saver, thread_id, keep_turns=1)
        known = (await http.get(url, params={"turn": 11})).json()
        assert known["items"][-1]["value"] == "v11" and known["items"][-1]["current"]
        assert known["value"] == "v11" and known["items"][0]["status"] == "pruned"


async def test_the_schema_is_closed_with_a_token_unless_made_public() -> None:
    saver = PruningInMemorySaver()
    async with client(create_app(saver, token="s3cret")) as http:
        assert (await http.get("/openapi.json")).status_code == 401
    async with client(create_app(saver, token="s3cret"), token="s3cret") as http:
        assert (await http.get("/openapi.json")).status_code == 200
    async with client(create_app(saver, token="s3cret", public_docs=True)) as http:
        assert (await http.get("/openapi.json")).status_code == 200


async def test_the_reference_is_served_from_the_app_itself() -> None:
    """/docs and /redoc are pages like the timeline (the schema they read asks for the
    token, tests/test_page.py drives them); every file they load is served by the app."""
    async with client(create_app(PruningInMemorySaver(), token="s3cret")) as http:
        assert 'href="docs"' in (await http.get("/")).text
        for route in ("/docs", "/redoc"):
            page = await http.get(route)
            assert page.status_code == 200, route
            assert "https:" not in page.text and "//cdn" not in page.text
            for asset in re.findall(r'(?:src|href)="(static/[^"]+)"', page.text):
                assert (await http.get(f"/{asset}")).status_code == 200, asset


async def test_the_page_and_the_timeline(saver: Any, thread_id: str) -> None:
    """/ serves the page without the token (it holds no data); the timeline it draws needs
    the token, and shows only the keys allowed_keys admits."""
    agent = agent_on(saver, ring_size=1)
    for text in ["find Copenhagen", "chat", "find Aarhus", "find Aarhus"]:
        await run_turn(agent, thread_id, text)
    app = create_app(saver, token="t0k", allowed_keys=["gazet/get_aoi/b*"])
    async with client(app) as anonymous:
        page = await anonymous.get("/")
        assert page.status_code == 200 and '<base href="/">' in page.text
        assert (await anonymous.get("/static/page.js")).status_code == 200
        assert (await anonymous.get(f"/threads/{thread_id}/timeline")).status_code == 401
    async with client(app, token="t0k") as http:
        body = (await http.get(f"/threads/{thread_id}/timeline")).json()
    assert body["total"] == 4 and body["retained"] == {"first": 1, "last": 4}
    assert body["keys"] == [
        {
            "key": BBOX,
            "set_from": 1,
            "starts": [1, 3],  # turn 4 republished Aarhus: no new version
            "first_written": 1,
            "evicted": [],
            "versions": 2,
            "known_from": 1,  # the ring holds Copenhagen (from 1) and Aarhus (from 3)
        }
    ]


async def test_every_response_carries_the_security_headers_and_the_page_its_policy() -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    app = create_app(InMemorySaver())
    async with client(app) as http:
        for path in ("/", "/threads", "/threads/none/state", "/static/page.js", "/openapi.json"):
            response = await http.get(path)
            assert response.headers["x-content-type-options"] == "nosniff", path
            assert response.headers["x-frame-options"] == "DENY", path
            assert response.headers["referrer-policy"] == "no-referrer", path
        page = await http.get("/")
        policy = page.headers["content-security-policy"]
        assert "default-src 'none'" in policy and "script-src 'self'" in policy
        assert "frame-ancestors 'none'" in policy


async def test_an_authorize_hook_that_raises_is_answered_as_a_problem() -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    def broken(request: Any, thread_id: str) -> bool:
        raise KeyError("tenant")

    saver = InMemorySaver()
    await run_turn(agent_on(saver), "t1", "find Aarhus")
    async with client(create_app(saver, authorize=broken)) as http:
        response = await http.get("/threads/t1/state")
    assert response.status_code == 500
    assert response.headers["content-type"] == "application/problem+json"
    body = response.json()
    assert body["code"] == "authorize_failed" and "KeyError" in body["detail"]


async def test_the_schema_documents_problems_as_they_are_sent() -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    async with client(create_app(InMemorySaver())) as http:
        schema = (await http.get("/openapi.json")).json()
    errors = [
        response
        for path in schema["paths"].values()
        for operation in path.values()
        for status, response in operation["responses"].items()
        if status[0] in "45"
    ]
    assert errors and all("application/json" not in r.get("content", {}) for r in errors)
    assert all("application/problem+json" in r["content"] for r in errors if "content" in r)


async def test_the_listing_cursor_reveals_no_thread_the_caller_may_not_read() -> None:
    """Pages hold only threads the caller may read, full where there are enough, and every
    cursor is one of those threads' own; paging through sees each of them once."""
    from mcp_state_versions.backends import thread_cursor

    saver = PruningInMemorySaver()
    for n in range(7):
        await run_turn(agent_on(saver), f"{'mine' if n % 3 == 0 else 'theirs'}-{n}", "find Oslo")
    app = create_app(saver, authorize=lambda request, thread_id: thread_id.startswith("mine"))
    seen: list[str] = []
    async with client(app) as http:
        heads = {
            item["thread_id"]: item
            for item in (await http.get("/threads", params={"limit": 50})).json()["threads"]
        }
        assert sorted(heads) == ["mine-0", "mine-3", "mine-6"]
        cursor = None
        while True:
            params = {"limit": 1, **({"before": cursor} if cursor else {})}
            body = (await http.get("/threads", params=params)).json()
            seen += [item["thread_id"] for item in body["threads"]]
            if body["next"] is None:
                break
            mine = [
                thread_cursor(
                    thread, (await CheckpointHistory(saver).branch_checkpoint_ids(thread))[0]
                )
                for thread in heads
            ]
            assert body["next"] in mine  # never a thread it may not read
            cursor = body["next"]
    assert sorted(seen) == ["mine-0", "mine-3", "mine-6"] and len(seen) == 3


async def test_a_turn_s_conversation_names_its_message_calls_and_reply() -> None:
    saver = PruningInMemorySaver()
    agent = agent_on(saver, ring_size=1)
    for text in ("find Copenhagen", "chat", "find Oslo"):
        await run_turn(agent, "talk", text)
    async with client(create_app(saver)) as http:
        turn = (await http.get("/threads/talk/turns/3")).json()
        assert turn["user"] == "find Oslo" and turn["reply"]
        [call] = turn["calls"]
        assert call["tool"] == "get_aoi" and call["args"] == {"place": "Oslo"}
        assert BBOX in call["keys"] and call["result"].startswith("[state updated:")
        chat = (await http.get("/threads/talk/turns/2")).json()
        assert chat["user"] == "chat" and chat["calls"] == []
        never = await http.get("/threads/talk/turns/9")
        assert never.status_code == 404 and never.json()["code"] == "turn_never_happened"
        await prune_thread(saver, "talk", keep_turns=1)
        gone = await http.get("/threads/talk/turns/1")
        assert gone.status_code == 410 and gone.json()["code"] == "turn_not_retained"
        keys = (await http.get("/threads/talk/timeline")).json()["keys"]
        known = {row["key"]: row["known_from"] for row in keys}
        assert known[BBOX] == 1  # Oslo since 3, and the ring's Copenhagen since 1


async def test_any_thread_id_and_key_can_be_addressed() -> None:
    """A thread id holding ``/`` is sent with it encoded (``%2F``), and an id or key part of
    dots (which clients resolve as ``.`` and ``..`` before sending) behind a ``~``: each
    reads its own thread and key, never another's, and a dotted key that is not set is
    answered for that key."""
    from ..conversation import PUT, agent_graph

    saver = PruningInMemorySaver()
    agent = agent_graph(saver, 2)
    ids = {"user/42": "user%2F42", "..": "~..", ".": "~.", "~..": "~~..", "a/../b": "a%2F..%2Fb"}
    for number, thread_id in enumerate(ids, start=1):
        config = {"configurable": {"thread_id": thread_id}}
        await agent.ainvoke({"messages": [HumanMessage(f"put k={number}")]}, config)
    await agent.ainvoke(
        {"messages": [HumanMessage("put k=0")]}, {"configurable": {"thread_id": "b"}}
    )
    async with client(create_app(saver)) as http:
        for number, (thread_id, sent) in enumerate(ids.items(), start=1):
            answer = await http.get(f"/threads/{sent}/state/{PUT}k")
            assert answer.status_code == 200, (thread_id, answer.text)
            assert answer.json()["thread_id"] == thread_id and answer.json()["value"] == str(number)
            turns = await http.get(f"/threads/{sent}/turns")
            assert turns.status_code == 200 and turns.json()["thread_id"] == thread_id
        dotted = await http.get(f"/threads/~../state/{PUT}~..")
        assert dotted.status_code == 404 and dotted.json()["code"] == "unknown_key"
        assert f"{PUT}.." in dotted.json()["detail"]


async def test_every_problem_type_is_a_page_of_the_app_saying_what_to_do() -> None:
    """A problem's ``type`` is the URL of the app's page about its code, under wherever the app
    is mounted, and every code the API can send has one."""
    import mcp_state_versions.api as api_package
    from mcp_state_versions.api.problems import PROBLEM_CODES
    from mcp_state_versions.cli import EXIT_CODES
    from mcp_state_versions.walk.history import _OUTCOMES

    sent = {code for code, _status in _OUTCOMES.values()} - {"found"}
    for module in Path(api_package.__file__).parent.glob("*.py"):
        sent |= set(re.findall(r'ProblemError\(\s*\d+,\s*"([a-z_]+)"', module.read_text()))
        sent |= set(re.findall(r'^\s*"([a-z_]+)",$', module.read_text(), re.M)) & set(EXIT_CODES)
    assert sent <= set(PROBLEM_CODES), sent - set(PROBLEM_CODES)

    outer = Starlette(routes=[Mount("/session-state", app=create_app(PruningInMemorySaver()))])
    async with client(outer) as http:
        problem = (await http.get("/session-state/threads/nope/state")).json()
        assert problem["type"] == "http://test/session-state/problems/unknown_thread"
        about = await http.get(problem["type"])
        assert about.status_code == 200 and "<code>unknown_thread</code>" in about.text
        assert "GET threads" in about.text
        missing = await http.get("/session-state/problems/no_such_code")
        assert missing.status_code == 404 and missing.json()["code"] == "not_found"
