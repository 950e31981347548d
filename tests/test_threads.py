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
from mcp_state_versions.threads import list_threads

from .test_sweep import _turns, fresh_saver

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

    from mcp_state_versions.retention import PruningSqliteSaver

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
