"""Damaged stored state: the reader is told which thread and turn, in its own terms, and the
turns the damage does not reach still read.

The damage is what was found in deployments: an entry whose fields have the wrong types, a
ring that is not a list, and random bytes where a checkpoint's ``tool_state`` is stored. Each
is written into a real saver's storage (memory, SQLite, PostgreSQL), then read by the model's
tool, over HTTP, and from the command line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any
from uuid import uuid4

import httpx
import pytest

from mcp_state_versions.agent.build import run_turn
from mcp_state_versions.agent.inspect_state import make_inspect_state
from mcp_state_versions.api import create_app
from mcp_state_versions.backends import TOOL_STATE, backend_for
from mcp_state_versions.demo.run import GAZETTEER
from mcp_state_versions.walk.checkpoints import CheckpointHistory

from ..conftest import BACKENDS, PG_DSN, open_backend, runtime_for
from ..helpers import BBOX, agent_on

CPH = GAZETTEER["copenhagen"]["bbox"]
DAMAGE = ["wrong_types", "ring", "bytes"]


async def _end_of(saver: Any, thread_id: str, turn: int) -> str:
    history = CheckpointHistory(saver)
    chain = await history._chain(thread_id)
    found = await chain.end_of_turn_confirmed(turn)
    assert found is not None
    return str(chain.links[found][0])


async def damage(saver: Any, kind: str, thread_id: str, checkpoint_id: str, how: str) -> None:
    """Damage what ``checkpoint_id`` stores for ``tool_state``, the way ``how`` names."""
    backend = backend_for(saver)
    _, value = await backend.tool_state(thread_id, "", checkpoint_id)
    value = json.loads(json.dumps(value))
    if how == "wrong_types":
        value[BBOX]["versions"] = "many"
    elif how == "ring":
        value[BBOX]["ring"] = "x"
    await backend.write_snapshot(thread_id, "", checkpoint_id, value)
    if how != "bytes":
        return
    # Random bytes behind 0xc1, which msgpack never uses: random bytes alone sometimes begin
    # with a whole value (0x80 is an empty map, and the rest is ignored), which is not damage.
    garbage = b"\xc1" + os.urandom(47)
    if kind == "memory":
        found = next(key for key in saver.blobs if key[0] == thread_id and key[2] == TOOL_STATE)
        version = backend._version(thread_id, "", checkpoint_id)[1]  # type: ignore[attr-defined]
        saver.blobs[(thread_id, "", TOOL_STATE, version)] = ("msgpack", garbage)
        assert found
    elif kind == "sqlite":
        await _execute(
            saver,
            "UPDATE checkpoints SET checkpoint = ? WHERE thread_id = ? AND checkpoint_id = ?",
            (garbage, thread_id, checkpoint_id),
        )
    else:
        await _execute(
            saver,
            "UPDATE checkpoint_blobs b SET blob = %s FROM checkpoints c "
            "WHERE c.thread_id = %s AND c.checkpoint_id = %s AND b.thread_id = c.thread_id "
            "AND b.checkpoint_ns = c.checkpoint_ns AND b.channel = %s "
            "AND b.version = c.checkpoint -> 'channel_versions' ->> %s",
            (garbage, thread_id, checkpoint_id, TOOL_STATE, TOOL_STATE),
        )


async def _execute(saver: Any, sql: str, params: tuple[Any, ...]) -> None:
    """One statement on a SQL saver's own connection, committed (SQLite's ``?`` marks, or
    PostgreSQL's ``%s``)."""
    if "%s" not in sql:
        async with saver.lock:
            await saver.conn.execute(sql, params)
            await saver.conn.commit()
    else:
        async with saver._cursor() as cursor:
            await cursor.execute(sql, params)


async def _thread(saver: Any) -> tuple[Any, str]:
    agent = agent_on(saver, ring_size=0)
    thread_id = f"damaged-{uuid4().hex[:12]}"
    for text in ["find Copenhagen", "find Aarhus", "find Oslo"]:
        await run_turn(agent, thread_id, text)
    return agent, thread_id


@pytest.mark.parametrize("how", DAMAGE)
@pytest.mark.parametrize("kind", BACKENDS)
async def test_a_damaged_turn_is_named_and_the_turns_before_it_still_read(
    kind: str, how: str, tmp_path: Any
) -> None:
    async with await open_backend(kind, tmp_path) as saver:
        agent, thread_id = await _thread(saver)
        state = (await agent.aget_state({"configurable": {"thread_id": thread_id}})).values
        await damage(saver, kind, thread_id, await _end_of(saver, thread_id, 2), how)

        tool = make_inspect_state(history=CheckpointHistory(saver))
        runtime = runtime_for(state, thread_id)
        text = await tool.ainvoke({"key": BBOX, "turn": 2, "runtime": runtime})
        assert "damaged at turn 2" in text and "Do not guess" in text, text
        text = await tool.ainvoke({"key": BBOX, "turn": 1, "runtime": runtime})
        assert text.endswith(json.dumps(CPH)), text

        transport = httpx.ASGITransport(app=create_app(saver))
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
            url = f"/threads/{thread_id}/state/{BBOX}"
            damaged = await http.get(url, params={"turn": 2})
            assert damaged.status_code == 500
            assert damaged.headers["content-type"] == "application/problem+json"
            body = damaged.json()
            assert body["code"] == "damaged_state" and body["status"] == 500
            assert body["thread_id"] == thread_id and body["turn"] == 2
            assert thread_id in body["detail"] and "turn 2" in body["detail"]
            earlier = await http.get(url, params={"turn": 1})
            assert earlier.status_code == 200 and earlier.json()["value"] == CPH


@pytest.mark.parametrize("how", DAMAGE)
@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def test_a_damaged_head_is_one_line_from_the_cli_and_earlier_turns_still_read(
    kind: str, how: str, tmp_path: Any
) -> None:
    async with await open_backend(kind, tmp_path) as saver:
        _, thread_id = await _thread(saver)
        head = await backend_for(saver).head(thread_id, "")
        assert head is not None
        await damage(saver, kind, thread_id, head, how)
        spec = PG_DSN if kind == "postgres" else f"sqlite:{tmp_path / 't.sqlite'}"

        def cli(*args: str) -> subprocess.CompletedProcess[str]:
            command = [sys.executable, "-m", "mcp_state_versions.cli", *args]
            return subprocess.run(command, capture_output=True, text=True, timeout=120)

        base = ["inspect", "--checkpointer", spec, "--thread", thread_id]
        done = cli(*base, BBOX)
        assert done.returncode == 8, done.stderr
        assert done.stdout == "" and len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert thread_id in done.stderr and "damaged" in done.stderr
        assert "Traceback" not in done.stderr
        done = cli(*base, BBOX, "--turn", "1", "--json")
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["value"] == CPH

        transport = httpx.ASGITransport(app=create_app(saver))
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
            now = await http.get(f"/threads/{thread_id}/state")
            assert now.status_code == 500 and now.json()["code"] == "damaged_state"
            assert "current state" in now.json()["detail"]
            earlier = await http.get(f"/threads/{thread_id}/state/{BBOX}", params={"turn": 1})
            assert earlier.status_code == 200 and earlier.json()["value"] == CPH


async def _set_parent(saver: Any, kind: str, thread_id: str, child: str, parent: str) -> None:
    """Point ``child``'s parent link at ``parent`` in storage (damage: a hand edit, a copy)."""
    mark = "?" if kind == "sqlite" else "%s"
    sql = (
        f"UPDATE checkpoints SET parent_checkpoint_id = {mark} "
        f"WHERE thread_id = {mark} AND checkpoint_id = {mark}"
    )
    await _execute(saver, sql, (parent, thread_id, child))


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def test_a_parent_link_cycle_is_damage_of_that_thread_alone(kind: str, tmp_path: Any) -> None:
    """A checkpoint whose parent link points at a newer one (a cycle): the thread's reads
    answer damage, within bounds, and another thread's reads are untouched."""
    import asyncio

    async with await open_backend(kind, tmp_path) as saver:
        agent, thread_id = await _thread(saver)
        _, other = await _thread(saver)
        state = (await agent.aget_state({"configurable": {"thread_id": thread_id}})).values
        head = state and (await CheckpointHistory(saver).branch_checkpoint_ids(thread_id))[0]
        await _set_parent(saver, kind, thread_id, await _end_of(saver, thread_id, 2), head)
        from mcp_state_versions.backends import forget_histories

        forget_histories(saver)  # what another process, which never read the thread, sees
        tool = make_inspect_state(history=CheckpointHistory(saver))
        runtime = runtime_for(state, thread_id)
        asked = tool.ainvoke({"key": BBOX, "turn": 1, "runtime": runtime})
        text = await asyncio.wait_for(asked, 120)  # a guard against a hang, not a timing
        assert "damaged" in text and "cycle" in text, text
        transport = httpx.ASGITransport(app=create_app(saver))
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
            damaged = await http.get(f"/threads/{thread_id}/state/{BBOX}", params={"turn": 1})
            assert damaged.status_code == 500 and damaged.json()["code"] == "damaged_state"
            fine = await http.get(f"/threads/{other}/state/{BBOX}", params={"turn": 1})
            assert fine.status_code == 200 and fine.json()["value"] == CPH
            listed = await http.get("/threads", params={"contains": thread_id[-12:]})
            assert listed.status_code == 200, listed.text  # the listing lists it as damaged
            [item] = listed.json()["threads"]
            assert item["turns"] is None and "cycle" in item["damage"]


async def test_metadata_that_is_not_json_in_a_file_the_stock_saver_wrote(tmp_path: Any) -> None:
    """One checkpoint row whose metadata is not JSON (a hand edit, a torn write). The
    library's index is built over every row: the row reads as one without metadata, so the
    writer opens the file, ``index`` builds, and every turn reads its value, the damaged
    row a thread's head or in its middle (the walk reads the checkpoint itself where its
    metadata would have said something: its stamp, its delta counter)."""
    import sqlite3

    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    from mcp_state_versions.savers.specs import open_checkpointer

    path = tmp_path / "stock.sqlite"
    async with AsyncSqliteSaver.from_conn_string(str(path)) as saver:
        middle, head = (await _thread(saver))[1], (await _thread(saver))[1]
        middle_at = await _end_of(saver, middle, 1)
        head_at = await backend_for(saver).head(head, "")
    with sqlite3.connect(path) as db:
        for thread_id, checkpoint_id in [(middle, middle_at), (head, head_at)]:
            db.execute(
                "UPDATE checkpoints SET metadata = ? WHERE thread_id = ? AND checkpoint_id = ?",
                (b"\xff{not json", thread_id, checkpoint_id),
            )
    spec = f"sqlite:{path}"

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "mcp_state_versions.cli", args[0], "--checkpointer"]
        return subprocess.run(
            [*command, spec, *args[1:]], capture_output=True, text=True, timeout=120
        )

    expected = {1: CPH, 2: GAZETTEER["aarhus"]["bbox"], 3: GAZETTEER["oslo"]["bbox"]}
    for turn, value in expected.items():  # before the index exists, then with it
        done = cli("inspect", "--thread", middle, BBOX, "--turn", str(turn), "--json")
        assert done.returncode == 0 and json.loads(done.stdout)["value"] == value, done.stderr
    done = cli("index")
    assert done.returncode == 0 and "in place" in done.stdout, done.stderr
    for turn, value in expected.items():
        done = cli("inspect", "--thread", head, BBOX, "--turn", str(turn), "--json")
        assert done.returncode == 0 and json.loads(done.stdout)["value"] == value, done.stderr
    done = cli("threads", "--json")
    assert done.returncode == 0 and done.stdout.count('"turns": 3') == 2, done.stdout
    async with open_checkpointer(spec) as saver:  # the library's writer, which indexes
        transport = httpx.ASGITransport(app=create_app(saver))
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
            for turn, value in expected.items():
                answer = await http.get(f"/threads/{middle}/state/{BBOX}", params={"turn": turn})
                assert answer.status_code == 200 and answer.json()["value"] == value
            now = await http.get(f"/threads/{head}/state/{BBOX}")
            assert now.status_code == 200 and now.json()["value"] == expected[3], now.text
            listed = await http.get("/threads")
            assert listed.status_code == 200, listed.text
        await run_turn(agent_on(saver, ring_size=0), middle, "find Copenhagen")
        history = CheckpointHistory(saver)
        assert (await history.turns(middle)).total == 4


@pytest.mark.parametrize("kind", BACKENDS)
async def test_a_parent_link_into_another_thread_is_damage_not_keys_never_set(
    kind: str, tmp_path: Any
) -> None:
    """A checkpoint whose parent link names a checkpoint of another thread (a copy, a hand
    edit). Its ``tool_state`` is held as writes since a snapshot it cannot reach: the thread
    answers ``damaged_state``, never ``key_not_set_yet`` for turns whose values were set; a
    prune (which seals the checkpoint it keeps oldest) is no such damage, and the other
    thread reads as before."""
    async with await open_backend(kind, tmp_path) as saver:
        _, thread_id = await _thread(saver)
        _, other = await _thread(saver)
        chain = await CheckpointHistory(saver)._chain(thread_id)
        ids = [str(link[0]) for link in chain.links]
        child = ids[ids.index(await _end_of(saver, thread_id, 2)) - 1]  # turn 3's first
        foreign = await _end_of(saver, other, 1)
        if kind == "memory":
            stored = saver.storage[thread_id][""]
            checkpoint, metadata, _ = stored[child]
            stored[child] = (checkpoint, metadata, foreign)
        else:
            await _set_parent(saver, kind, thread_id, child, foreign)
        from mcp_state_versions.backends import forget_histories

        forget_histories(saver)
        transport = httpx.ASGITransport(app=create_app(saver))
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
            for path in ("state", f"state/{BBOX}"):
                answer = await http.get(f"/threads/{thread_id}/{path}")
                assert answer.status_code == 500, answer.text
                assert answer.json()["code"] == "damaged_state"
                assert "not in this thread" in answer.json()["detail"]
            # Turn 1 ended before the damaged link, on checkpoints the head's chain no longer
            # reaches: its value, where a backend finds them, or damage; never "pruned" or
            # "not set yet".
            earlier = await http.get(f"/threads/{thread_id}/state/{BBOX}", params={"turn": 1})
            if earlier.status_code == 200:
                assert earlier.json()["value"] == CPH, earlier.text
            else:
                assert earlier.json()["code"] == "damaged_state", earlier.text
            fine = await http.get(f"/threads/{other}/state/{BBOX}", params={"turn": 1})
            assert fine.status_code == 200 and fine.json()["value"] == CPH


async def test_bytes_changed_in_the_lineage_index_are_damage_not_an_empty_thread(
    tmp_path: Any,
) -> None:
    """Random bytes in the SQLite lineage index's pages: here, the thread id in each of one
    thread's index entries changed by one letter (the page stays well formed, so SQLite
    reads it without complaint, and finds none of the thread's checkpoints through it). The
    thread answers damaged_state, never ``0 keys`` or ``0 turns``; the other thread reads."""
    import sqlite3

    from mcp_state_versions.backends.sqlite import INDEX_NAME
    from mcp_state_versions.savers.specs import open_checkpointer

    path = tmp_path / "index.sqlite"
    async with open_checkpointer(f"sqlite:{path}") as saver:
        for thread_id in ("t-aaaa", "t-bbbb"):
            for text in ["find Copenhagen", "find Aarhus"]:
                await run_turn(agent_on(saver, ring_size=0), thread_id, text)
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        pages = [
            row[0] for row in db.execute("SELECT pageno FROM dbstat WHERE name = ?", (INDEX_NAME,))
        ]
        size = db.execute("PRAGMA page_size").fetchone()[0]
    data = bytearray(path.read_bytes())
    for page in pages:
        start, end = (page - 1) * size, page * size
        data[start:end] = bytes(data[start:end]).replace(b"t-bbbb", b"t-bbbc")
    path.write_bytes(bytes(data))

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "mcp_state_versions.cli", args[0], "--checkpointer"]
        return subprocess.run(
            [*command, f"sqlite:{path}", *args[1:]], capture_output=True, text=True, timeout=120
        )

    for args in (["inspect", "--thread", "t-bbbb"], ["turns", "--thread", "t-bbbb"],
                 ["inspect", "--thread", "t-bbbb", BBOX, "--turn", "1"]):  # fmt: skip
        done = cli(*args)
        assert done.returncode == 8, (args, done.stdout, done.stderr)
        assert "lineage index" in done.stderr and "Traceback" not in done.stderr
    done = cli("inspect", "--thread", "t-aaaa", BBOX, "--turn", "1", "--json")
    assert done.returncode == 0 and json.loads(done.stdout)["value"] == CPH, done.stderr
    done = cli("threads", "--json")
    listed = {item["thread_id"]: item for item in json.loads(done.stdout)["threads"]}
    assert listed["t-aaaa"]["turns"] == 2 and "lineage index" in listed["t-bbbb"]["damage"]
