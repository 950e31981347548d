"""Sweeping every thread of a saver: idle threads go whole, the rest keep their last turns,
a dry run changes nothing and predicts the real run, a sweep resumes where it stopped, and
writers running beside it lose nothing the policy keeps."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest

from mcp_state_versions.agent.build import run_turn
from mcp_state_versions.backends import checkpoint_time
from mcp_state_versions.demo.run import GAZETTEER
from mcp_state_versions.retention.sweep import reclaim, sweep
from mcp_state_versions.savers.memory import PruningInMemorySaver
from mcp_state_versions.savers.sqlite import PruningSqliteSaver
from mcp_state_versions.walk.checkpoints import CheckpointHistory

from ..conftest import PG_DSN, _check_postgres
from ..helpers import BBOX, agent_on
from ..workers import place_of

KINDS = ["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@asynccontextmanager
async def fresh_saver(kind: str, tmp_path: Path) -> AsyncIterator[tuple[Any, str]]:
    """A saver holding nothing yet, and where it is (a sweep sees every thread, so each test
    has a store of its own: a SQLite file, or a PostgreSQL database made for it)."""
    if kind == "memory":
        yield PruningInMemorySaver(), ""
    elif kind == "sqlite":
        path = str(tmp_path / "sweep.sqlite")
        async with PruningSqliteSaver.from_conn_string(path) as saver:
            await saver.setup()
            yield saver, path
    else:
        import psycopg

        from mcp_state_versions.savers.postgres import open_postgres_saver

        await _check_postgres()
        name = f"sweep_{uuid4().hex[:12]}"
        admin = await psycopg.AsyncConnection.connect(PG_DSN, autocommit=True)
        await admin.execute(f"CREATE DATABASE {name}")
        dsn = PG_DSN.rsplit("/", 1)[0] + f"/{name}"
        try:
            async with open_postgres_saver(dsn) as saver:
                yield saver, dsn
        finally:
            await admin.execute(f"DROP DATABASE {name} WITH (FORCE)")
            await admin.close()


async def _turns(saver: Any, thread_id: str, count: int) -> None:
    agent = agent_on(saver, ring_size=0)
    for turn in range(1, count + 1):
        await run_turn(agent, thread_id, f"find {place_of(turn)}")


def test_a_checkpoint_id_tells_when_it_was_made() -> None:
    from langgraph.checkpoint.base.id import uuid6

    assert abs(checkpoint_time(str(uuid6())) - time.time()) < 2  # type: ignore[operator]
    assert checkpoint_time("not-a-uuid") is None and checkpoint_time(str(uuid4())) is None


@pytest.mark.parametrize("kind", KINDS)
async def test_idle_threads_go_whole_and_the_others_keep_their_last_turns(
    kind: str, tmp_path: Path
) -> None:
    # The sweeps' clock is the test's: one second after the idle threads were written, so
    # they are idle and the live ones (written after) are not, however slow the machine.
    async with fresh_saver(kind, tmp_path) as (saver, _):
        for thread in ("idle-a", "idle-b"):
            await _turns(saver, thread, 2)
        now = time.time() + 1.0
        for thread in ("live-a", "live-b", "live-c"):
            await _turns(saver, thread, 4)
        dry = await sweep(saver, keep_turns=2, idle_for=1.0, dry_run=True, now=lambda: now)
        history = CheckpointHistory(saver)
        assert await history.present("idle-a") is not None  # a dry run removed nothing
        done = await sweep(saver, keep_turns=2, idle_for=1.0, now=lambda: now)
        assert (done.threads_seen, done.threads_deleted, done.threads_pruned) == (5, 2, 3)
        assert done.deleted == ("idle-a", "idle-b")
        for figure in ("threads_deleted", "threads_pruned", "checkpoints_removed"):
            assert getattr(dry, figure) == getattr(done, figure), figure
        assert dry.bytes_removed == done.bytes_removed > 0
        assert await history.present("idle-a") is None
        for thread in ("live-a", "live-b", "live-c"):
            index = await history.turns(thread)
            assert index.total == 4 and index.retained[0] <= 3
            snapshot = await history.tool_state_at(thread, 4)
            assert snapshot.tool_state is not None
            assert snapshot.tool_state[BBOX]["value"] == GAZETTEER[place_of(4).lower()]["bbox"]
        again = await sweep(saver, keep_turns=2, idle_for=1.0, now=lambda: now)
        assert again.checkpoints_removed == 0 and again.threads_deleted == 0


async def test_a_sweep_resumes_where_it_stopped(tmp_path: Path) -> None:
    async with fresh_saver("sqlite", tmp_path) as (saver, _):
        for thread in ("t1", "t2", "t3"):
            await _turns(saver, thread, 3)
        first = await sweep(saver, keep_turns=1, limit=2, page=1)
        assert first.threads_seen == 2 and first.resume_after == "t2"
        rest = await sweep(saver, keep_turns=1, after=first.resume_after)
        assert rest.threads_seen == 1 and rest.pruned == ("t3",) and rest.resume_after is None


async def test_a_dry_run_leaves_the_sqlite_file_byte_for_byte(tmp_path: Path) -> None:
    async with fresh_saver("sqlite", tmp_path) as (saver, path):
        for thread in ("a", "b"):
            await _turns(saver, thread, 3)
        await asyncio.sleep(0.1)  # both idle for longer than the sweep's 0.01 s
        # The database and its WAL, byte for byte (the -shm file is SQLite's shared-memory
        # index of the WAL, which every reader writes to)
        files = [Path(path), Path(path + "-wal")]
        before = [(p.name, p.read_bytes()) for p in files]
        report = await sweep(saver, keep_turns=1, idle_for=0.01, dry_run=True)
        assert report.threads_deleted == 2 and report.dry_run
        assert [(p.name, p.read_bytes()) for p in files] == before
        real = await sweep(saver, keep_turns=1, idle_for=0.01)
        assert (real.threads_deleted, real.checkpoints_removed, real.bytes_removed) == (
            report.threads_deleted,
            report.checkpoints_removed,
            report.bytes_removed,
        )
        assert (await reclaim(saver) or 0) > 0  # VACUUM gave the space back


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def test_sweeps_beside_a_writer_keep_what_the_policy_keeps(kind: str, tmp_path: Path) -> None:
    """A writer in another process runs turns on one thread while this one sweeps over and
    over with a short idle time: the thread is active, so it is never deleted, and every turn
    the policy keeps reads right.

    The sweeps' clock is the test's, stopped a second after the thread's first turn, so the
    thread is active however long the writer takes to start on a busy machine; the same
    policy an hour later would delete it (a dry run shows), so the idle check is live."""
    async with fresh_saver(kind, tmp_path) as (saver, where):
        thread = "written-meanwhile"
        await _turns(saver, thread, 1)
        stopped = time.time() + 1.0
        command = [sys.executable, "-m", "tests.workers", "write", where, thread, "15"]
        writer = subprocess.Popen(command)
        sweeps = 0
        while writer.poll() is None:
            report = await sweep(saver, keep_turns=3, idle_for=3.0, now=lambda: stopped)
            assert report.threads_deleted == 0
            sweeps += 1
        assert writer.returncode == 0 and sweeps > 1
        later = await sweep(saver, idle_for=3.0, dry_run=True, now=lambda: time.time() + 3600)
        assert later.threads_deleted == 1
        await sweep(saver, keep_turns=3)
        history = CheckpointHistory(saver)
        index = await history.turns(thread)
        assert index.total == 16 and index.retained[-1] == 16
        for turn in index.retained:
            snapshot = await history.tool_state_at(thread, turn)
            assert snapshot.tool_state is not None, turn
            expected = GAZETTEER[place_of(turn - 1 if turn > 1 else 1).lower()]["bbox"]
            assert snapshot.tool_state[BBOX]["value"] == expected, turn


def test_a_schedule_comes_from_the_environment_and_refuses_what_it_cannot_read() -> None:
    from mcp_state_versions.retention.sweep import SweepSchedule, parse_duration

    assert SweepSchedule.from_env({}) is None
    schedule = SweepSchedule.from_env(
        {
            "MCP_STATE_VERSIONS_SWEEP_EVERY": "15m",
            "MCP_STATE_VERSIONS_SWEEP_KEEP_TURNS": "20",
            "MCP_STATE_VERSIONS_SWEEP_IDLE_FOR": "30d",
            "MCP_STATE_VERSIONS_SWEEP_DROP_ABANDONED": "true",
        }
    )
    assert schedule is not None and schedule.every == 900
    assert (schedule.policy.keep_turns, schedule.policy.idle_for) == (20, 30 * 86400)
    assert schedule.policy.drop_abandoned
    assert parse_duration("45") == 45 and parse_duration("2w") == 14 * 86400
    for environ, fragment in [
        ({"MCP_STATE_VERSIONS_SWEEP_EVERY": "soon"}, "MCP_STATE_VERSIONS_SWEEP_EVERY"),
        ({"MCP_STATE_VERSIONS_SWEEP_EVERY": "1h"}, "say what to sweep"),
        (
            {"MCP_STATE_VERSIONS_SWEEP_EVERY": "1h", "MCP_STATE_VERSIONS_SWEEP_KEEP_TURNS": "x"},
            "MCP_STATE_VERSIONS_SWEEP_KEEP_TURNS",
        ),
    ]:
        with pytest.raises(ValueError, match=fragment):
            SweepSchedule.from_env(environ)


async def test_a_background_sweeper_sweeps_on_schedule_and_logs_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    import logging

    from mcp_state_versions.retention.sweep import SweepPolicy, SweepSchedule, sweeping

    saver = PruningInMemorySaver()
    await _turns(saver, "long", 4)
    schedule = SweepSchedule(every=0.05, policy=SweepPolicy(keep_turns=1))
    with caplog.at_level(logging.INFO, logger="mcp_state_versions.retention.sweep"):
        async with sweeping(lambda: saver, schedule):
            deadline = time.monotonic() + 10
            while (await CheckpointHistory(saver).turns("long")).retained[0] < 3:
                assert time.monotonic() < deadline, "the sweeper did not prune"
                await asyncio.sleep(0.05)
    assert any("swept 1 threads" in r.getMessage() for r in caplog.records)
    index = await CheckpointHistory(saver).turns("long")
    assert index.total == 4


def test_serve_runs_the_sweeper_the_environment_asks_for(tmp_path: Path) -> None:
    """``serve`` with MCP_STATE_VERSIONS_SWEEP_EVERY set sweeps the file it serves (and so
    opens it for writing); the log says what each sweep removed."""
    import os
    import socket

    path = tmp_path / "served.sqlite"

    async def write() -> None:
        async with PruningSqliteSaver.from_conn_string(str(path)) as saver:
            await _turns(saver, "served", 4)

    asyncio.run(write())
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {
        **os.environ,
        "MCP_STATE_VERSIONS_SWEEP_EVERY": "0.2s",
        "MCP_STATE_VERSIONS_SWEEP_KEEP_TURNS": "1",
    }
    command = [sys.executable, "-m", "mcp_state_versions.cli", "serve",
               "--checkpointer", f"sqlite:{path}", "--port", str(port)]  # fmt: skip
    server = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
    try:

        async def pruned() -> bool:
            async with PruningSqliteSaver.from_conn_string(str(path)) as saver:
                return (await CheckpointHistory(saver).turns("served")).retained[0] >= 3

        deadline = time.monotonic() + 30
        while not asyncio.run(pruned()):
            assert server.poll() is None, server.stderr.read() if server.stderr else ""
            assert time.monotonic() < deadline, "serve did not sweep"
            time.sleep(0.2)
    finally:
        server.terminate()
        _, log = server.communicate(timeout=15)
    assert "swept 1 threads" in log, log


@pytest.mark.parametrize("kind", KINDS)
async def test_an_idle_thread_goes_only_if_its_head_is_still_the_one_found_idle(
    kind: str, tmp_path: Path
) -> None:
    """The check and the delete are one step: a thread written after it was found idle (its
    head is no longer the one found) stays whole; one whose head is still it goes whole."""
    from mcp_state_versions.backends import backend_for

    async with fresh_saver(kind, tmp_path) as (saver, _):
        backend = backend_for(saver)
        await _turns(saver, "found-idle", 1)
        found = await backend.head("found-idle", "")
        assert found is not None
        await _turns(saver, "found-idle", 1)  # a run after the sweep found it idle
        head = await backend.head("found-idle", "")
        assert not await backend.delete_idle_thread("found-idle", found)
        assert (await CheckpointHistory(saver).turns("found-idle")).total == 1 + 1
        assert await backend.head("found-idle", "") == head
        assert await backend.delete_idle_thread("found-idle", head)  # type: ignore[arg-type]
        assert await backend.head("found-idle", "") is None
        assert await CheckpointHistory(saver).present("found-idle") is None


@pytest.mark.postgres
async def test_a_checkpoint_stored_while_an_idle_thread_is_deleted_keeps_it(
    tmp_path: Path,
) -> None:
    """PostgreSQL: a writer's INSERT of a new checkpoint is in flight (not committed) when
    the sweep's delete of the idle thread begins. The delete waits for it, then finds the
    thread written to, and keeps it whole: never a thread deleted with the run that just
    stored on it, nor the run's checkpoint left without its parents."""
    import psycopg
    from langgraph.checkpoint.base.id import uuid6

    from mcp_state_versions.backends import backend_for

    async with fresh_saver("postgres", tmp_path) as (saver, dsn):
        backend = backend_for(saver)
        await _turns(saver, "in-flight", 2)
        head = await backend.head("in-flight", "")
        before = len(await backend.checkpoint_ids("in-flight", ""))
        writer = await psycopg.AsyncConnection.connect(dsn)
        watcher = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
        try:
            await writer.execute(
                "INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, "
                "parent_checkpoint_id, type, checkpoint, metadata) SELECT thread_id, "
                "checkpoint_ns, %s, checkpoint_id, type, checkpoint, metadata FROM checkpoints "
                "WHERE thread_id = %s AND checkpoint_id = %s",
                (str(uuid6()), "in-flight", head),
            )
            deleting = asyncio.ensure_future(backend.delete_idle_thread("in-flight", head))  # type: ignore[arg-type]
            # Wait for the event, not for a time: the delete waiting on the writer's lock.
            while not deleting.done():
                waits = await watcher.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                    "AND datname = current_database()"
                )
                if (await waits.fetchone())[0]:  # type: ignore[index]
                    break
                await asyncio.sleep(0.01)
            await writer.commit()
            assert not await deleting, "the thread was deleted under the writer's checkpoint"
        finally:
            await writer.close()
            await watcher.close()
        assert len(await backend.checkpoint_ids("in-flight", "")) == before + 1


DAY = 86400.0


@pytest.mark.postgres
async def test_a_writer_whose_clock_is_behind_cannot_make_a_thread_look_idle(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A writer 40 days behind writes checkpoint ids dated 40 days ago. Where PostgreSQL keeps
    commit times (``track_commit_timestamp = on``) the sweep measures a thread's age by them
    and the server's ``now()``: the thread written a moment ago stays under ``idle_for=30d``,
    and goes once 30 days have passed by the server's clock. Without commit times, the age
    read from the ids is what there is (the README says so)."""
    from langgraph.checkpoint.base import id as checkpoint_ids

    from mcp_state_versions.savers.postgres import open_postgres_saver

    from ..pg_instance import postgres_instance

    behind = int(40 * DAY * 1e9)
    monkeypatch.setattr(checkpoint_ids, "_last_v6_timestamp", None)
    monkeypatch.setattr(
        checkpoint_ids, "time", type("Behind", (), {"time_ns": lambda: time.time_ns() - behind})
    )
    with postgres_instance(track_commit_timestamp="on") as server:
        async with open_postgres_saver(server.dsn) as saver:
            await _turns(saver, "skewed", 2)
            monkeypatch.undo()
            head = await CheckpointHistory(saver).branch_checkpoint_ids("skewed")
            assert time.time() - checkpoint_time(head[0]) > 39 * DAY  # type: ignore[operator]
            kept = await sweep(saver, idle_for=30 * DAY)
            assert kept.threads_deleted == 0 and await CheckpointHistory(saver).present("skewed")
            later = await sweep(saver, idle_for=30 * DAY, now=lambda: time.time() + 31 * DAY)
            assert later.deleted == ("skewed",)
