"""Finding threads: newest first, filtered, paged, with turns, last write and size, the same
from the library, the HTTP API and the command line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from mcp_state_versions.api import create_app
from mcp_state_versions.walk.threads import list_threads

from ..retention.test_sweep import _turns, fresh_saver

KINDS = ["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.mark.parametrize("kind", KINDS)
async def test_threads_newest_first_filtered_and_paged(kind: str, tmp_path: Path) -> None:
    async with fresh_saver(kind, tmp_path) as (saver, _):
        for thread, turns in [("team-a-1", 1), ("team-b-1", 2), ("team-a-2", 3)]:
            await _turns(saver, thread, turns)
        page = await list_threads(saver)
        assert [t.thread_id for t in page.threads] == ["team-a-2", "team-b-1", "team-a-1"]
        assert [t.turns for t in page.threads] == [3, 2, 1] and page.next is None
        assert all(t.stored_bytes > 0 and t.last_write is not None for t in page.threads)
        assert page.threads[0].last_write >= page.threads[1].last_write  # type: ignore[operator]
        first = await list_threads(saver, limit=2)
        assert [t.thread_id for t in first.threads] == ["team-a-2", "team-b-1"]
        rest = await list_threads(saver, limit=2, before=first.next)
        assert [t.thread_id for t in rest.threads] == ["team-a-1"] and rest.next is None
        only = await list_threads(saver, contains="team-a")
        assert [t.thread_id for t in only.threads] == ["team-a-2", "team-a-1"]

        def authorize(request: Any, thread_id: str) -> bool:
            return not thread_id.startswith("team-b")

        app = create_app(saver, authorize=authorize)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://api") as http:
            body = (await http.get("/threads", params={"limit": 1})).json()
            assert [t["thread_id"] for t in body["threads"]] == ["team-a-2"]
            assert body["threads"][0]["turns"] == 3 and body["next"]
            body = (await http.get("/threads", params={"before": body["next"]})).json()
            assert [t["thread_id"] for t in body["threads"]] == ["team-a-1"]  # not team-b
            assert (await http.get("/threads", params={"limit": 0})).status_code == 422


def test_the_threads_command(tmp_path: Path) -> None:
    import asyncio

    from mcp_state_versions.savers.sqlite import PruningSqliteSaver

    path = tmp_path / "listed.sqlite"

    async def write() -> None:
        async with PruningSqliteSaver.from_conn_string(str(path)) as saver:
            for thread in ("older", "newer"):
                await _turns(saver, thread, 2)

    asyncio.run(write())
    base = [
        sys.executable,
        "-m",
        "mcp_state_versions.cli",
        "threads",
        "--checkpointer",
        f"sqlite:{path}",
    ]
    done = subprocess.run([*base, "--json"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    listed = json.loads(done.stdout)
    assert [t["thread_id"] for t in listed["threads"]] == ["newer", "older"]
    assert listed["threads"][0]["turns"] == 2 and listed["next"] is None
    done = subprocess.run([*base, "--limit", "1"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "newer" in done.stdout and "more: --before" in done.stderr


@pytest.mark.parametrize("kind", KINDS)
async def test_text_no_store_can_hold_matches_no_thread(kind: str, tmp_path: Path) -> None:
    """A filter or cursor with a NUL byte or a lone surrogate (found by schemathesis on
    PostgreSQL, whose text cannot hold NUL) is an empty page, in the library and over HTTP."""
    async with fresh_saver(kind, tmp_path) as (saver, _):
        await _turns(saver, "team-a-1", 1)
        for text in ["a\x00", "\ud800"]:
            assert (await list_threads(saver, contains=text)).threads == ()
            assert (await list_threads(saver, before=text)).threads == ()
        transport = httpx.ASGITransport(app=create_app(saver))
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
            response = await http.get("/threads", params={"contains": "a\x00"})
        assert response.status_code == 200 and response.json() == {"threads": [], "next": None}


async def _copy_thread(saver: Any, source: str, target: str) -> None:
    """Copy every checkpoint of ``source`` (and its writes) to ``target`` through the saver's
    own API, ids and all, as an operator's copy of a thread does."""
    tuples = [t async for t in saver.alist({"configurable": {"thread_id": source}})]
    for found in reversed(tuples):  # oldest first: a parent before its children
        where = {"thread_id": target, "checkpoint_ns": ""}
        parent = (
            found.parent_config["configurable"]["checkpoint_id"] if found.parent_config else None
        )
        config = {"configurable": {**where, **({"checkpoint_id": parent} if parent else {})}}
        checkpoint = found.checkpoint
        stored = await saver.aput(
            config, checkpoint, found.metadata, dict(checkpoint["channel_versions"])
        )
        tasks: dict[str, list[tuple[str, Any]]] = {}
        for task_id, channel, value in found.pending_writes or []:
            tasks.setdefault(task_id, []).append((channel, value))
        for task_id, writes in tasks.items():
            await saver.aput_writes(stored, writes, task_id)


async def _every_page(saver: Any, limit: int) -> list[str]:
    seen: list[str] = []
    cursor = None
    while True:
        page = await list_threads(saver, limit=limit, before=cursor)
        seen += [summary.thread_id for summary in page.threads]
        if page.next is None:
            return seen
        cursor = page.next


@pytest.mark.parametrize("kind", KINDS)
async def test_threads_sharing_a_newest_checkpoint_are_each_listed_once(
    kind: str, tmp_path: Path
) -> None:
    """Copies of a thread keep its checkpoint ids, so their newest checkpoint is one id: pages
    go on from the thread as well as its head (pages of one skipped 3 of 6 such threads)."""
    async with fresh_saver(kind, tmp_path) as (saver, _):
        await _turns(saver, "older", 1)
        await _turns(saver, "original", 2)
        copies = [f"copy {n}" for n in range(5)]  # a space, as the cursor's own separator
        for copy in copies:
            await _copy_thread(saver, "original", copy)
        await _turns(saver, "newer", 1)
        expected = ["newer", *sorted(["original", *copies], reverse=True), "older"]
        assert await _every_page(saver, 1) == expected
        assert await _every_page(saver, 2) == expected
        listed = {t.thread_id: t.turns for t in (await list_threads(saver)).threads}
        assert all(listed[copy] == 2 for copy in copies)


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def test_a_page_of_counted_threads_costs_two_statements(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A listing polled by many clients made about 200 statements a page (each thread's
    history, and its size in two or three): under 50 clients nearly every request passed the
    deadline. Once a page's threads were counted it is the threads and their sizes."""
    from mcp_state_versions.backends import backend_for

    async with fresh_saver(kind, tmp_path) as (saver, _):
        for n in range(12):
            await _turns(saver, f"counted-{n}", 2)
        first = await list_threads(saver, limit=10)
        backend = type(backend_for(saver))
        statements: list[str] = []
        rows = backend._rows  # type: ignore[attr-defined]

        async def recording(self: Any, sql: str, params: Any) -> Any:
            statements.append(sql)
            return await rows(self, sql, params)

        monkeypatch.setattr(backend, "_rows", recording)
        again = await list_threads(saver, limit=10)
        assert len(statements) == 2, statements
        assert again == first and all(t.turns == 2 and t.stored_bytes > 0 for t in again.threads)
        monkeypatch.undo()
        for summary in again.threads:  # the sizes read together are the sizes read one by one
            alone = await backend_for(saver).stored_bytes(summary.thread_id, None, None)
            assert summary.stored_bytes == alone


@pytest.mark.parametrize("kind", KINDS)
async def test_remembered_turn_counts_are_those_a_fresh_read_gives(
    kind: str, tmp_path: Path
) -> None:
    """The listing remembers each thread's count by its newest checkpoint: after a new turn, a
    fork, an operator's edit and a prune, every listed count is the one read afresh."""
    from langchain_core.messages import AIMessage

    from mcp_state_versions.agent.build import run_turn
    from mcp_state_versions.retention.prune import prune_thread
    from mcp_state_versions.walk.checkpoints import CheckpointHistory

    from ..helpers import agent_on, fork_at

    async def check() -> None:
        for summary in (await list_threads(saver)).threads:
            fresh = await CheckpointHistory(saver).turns(summary.thread_id)
            assert summary.turns == fresh.total, summary

    async with fresh_saver(kind, tmp_path) as (saver, _):
        agent = agent_on(saver, ring_size=0)
        for thread in ("a", "b"):
            await _turns(saver, thread, 3)
        await check()
        await run_turn(agent, "a", "find Oslo")
        await check()
        await fork_at(agent, "b", 1, "find Bergen")
        await check()
        config = {"configurable": {"thread_id": "a"}}
        await agent.aupdate_state(config, {"messages": [AIMessage("an operator's note")]})
        await check()
        await prune_thread(saver, "a", keep_turns=1)
        await check()
        assert [t.turns for t in (await list_threads(saver)).threads] == [4, 2]


async def test_a_listing_cancelled_while_reading_a_count_leaves_the_others_their_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Listings asking at once share one read of a thread's count; when the listing doing the
    read is cancelled (its request's deadline), the others read it themselves and answer,
    where they were cancelled with it."""
    import asyncio

    from mcp_state_versions.backends import backend_for
    from mcp_state_versions.walk.checkpoints import CheckpointHistory
    from mcp_state_versions.walk.threads import _turn_count

    async with fresh_saver("sqlite", tmp_path) as (saver, _):
        await _turns(saver, "shared-count", 2)
        head = await backend_for(saver).head("shared-count", "")
        assert head is not None
        real = CheckpointHistory.turns
        reading, release = asyncio.Event(), asyncio.Event()

        async def held(self: Any, thread_id: str) -> Any:
            if not release.is_set():
                reading.set()
                await release.wait()  # the first read waits here until it is cancelled
            return await real(self, thread_id)

        monkeypatch.setattr(CheckpointHistory, "turns", held)
        first = asyncio.create_task(_turn_count(saver, "shared-count", head))
        await reading.wait()
        second = asyncio.create_task(_turn_count(saver, "shared-count", head))
        await asyncio.sleep(0)  # the second now waits on the first one's read
        release.set()
        first.cancel()
        assert await second == 2
        with pytest.raises(asyncio.CancelledError):
            await first
