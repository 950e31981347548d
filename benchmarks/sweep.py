"""Sweeping many threads: time, peak memory and checkpoints removed per second.

Two threads are grown for real (``build_agent``, ``run_turn``, six turns each): one, then a
pause, then the other, so the first is older than the sweep's idle time and the second is
not. Each is copied, rows and all, into half of ``threads`` threads by SQL (the copies keep
the checkpoint ids, so they keep their age). One sweep then deletes the idle half whole and
prunes the other half to its last two turns; a dry run of it is timed first. Both judge a
thread's age at the same moment (``sweep(now=)``). Checked: the
figures of the dry run equal the real run's, and every pruned thread still reads its last
turn right.

Run alone: ``python -m benchmarks.sweep --threads 10000 --backends sqlite,postgres``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import tracemalloc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from uuid import uuid4

from mcp_state_versions.retention.sweep import sweep
from mcp_state_versions.savers.postgres import open_postgres_saver
from mcp_state_versions.savers.sqlite import PruningSqliteSaver
from mcp_state_versions.walk.checkpoints import CheckpointHistory

from .common import KEY, PG_DSN, RESULTS, agent, analyzed, expected, grow, progress

TURNS = 6
KEEP_TURNS = 2
IDLE_FOR = 1.0


@asynccontextmanager
async def _store(backend: str, workdir: Path) -> AsyncIterator[tuple[Any, Any]]:
    """A saver on a store of its own, and a function copying a thread into many."""
    if backend == "sqlite":
        path = workdir / f"sweep-{uuid4().hex[:8]}.sqlite"
        async with PruningSqliteSaver.from_conn_string(str(path)) as saver:
            await saver.setup()

            async def copy(source: str, names: list[str]) -> None:
                async with saver.lock:
                    for table in ("checkpoints", "writes"):
                        columns = [
                            row[1]
                            async for row in await saver.conn.execute(f"PRAGMA table_info({table})")
                        ]
                        rest = ", ".join(c for c in columns if c != "thread_id")
                        await saver.conn.executemany(
                            f"INSERT INTO {table} (thread_id, {rest}) SELECT ?, {rest} "
                            f"FROM {table} WHERE thread_id = ?",
                            [(name, source) for name in names],
                        )
                    await saver.conn.commit()

            yield saver, copy
        return
    import psycopg

    name = f"sweep_bench_{uuid4().hex[:8]}"
    admin = await psycopg.AsyncConnection.connect(PG_DSN, autocommit=True)
    await admin.execute(f"CREATE DATABASE {name}")
    dsn = PG_DSN.rsplit("/", 1)[0] + f"/{name}"
    try:
        async with open_postgres_saver(dsn) as saver:

            async def copy(source: str, names: list[str]) -> None:
                async with saver._cursor() as cursor:
                    for table in ("checkpoints", "checkpoint_blobs", "checkpoint_writes"):
                        await cursor.execute(
                            "SELECT column_name FROM information_schema.columns "
                            "WHERE table_name = %s",
                            (table,),
                        )
                        columns = [row["column_name"] for row in await cursor.fetchall()]
                        rest = ", ".join(c for c in columns if c != "thread_id")
                        await cursor.execute(
                            f"INSERT INTO {table} (thread_id, {rest}) SELECT n, {rest} "
                            f"FROM {table}, unnest(%s::text[]) AS n WHERE thread_id = %s",
                            (names, source),
                        )

            yield saver, copy
    finally:
        await admin.execute(f"DROP DATABASE {name} WITH (FORCE)")
        await admin.close()


async def measure_one(backend: str, threads: int, workdir: Path) -> dict[str, Any]:
    async with _store(backend, workdir) as (saver, copy):
        bench = agent(saver, ring_size=0)
        progress(f"{backend}: two template threads of {TURNS} turns")
        await grow(bench, "template-idle", TURNS)
        await asyncio.sleep(IDLE_FOR * 2)
        await grow(bench, "template-live", TURNS)
        # Both sweeps judge age at the same moment, however long copying and the dry run take.
        moment = time.time() + IDLE_FOR / 2
        half = threads // 2
        progress(f"{backend}: copying them into {threads:,} threads")
        await copy("template-idle", [f"idle-{n:05d}" for n in range(half)])
        await copy("template-live", [f"live-{n:05d}" for n in range(threads - half)])
        await analyzed(saver)
        policy = {"keep_turns": KEEP_TURNS, "idle_for": IDLE_FOR, "now": lambda: moment}
        progress(f"{backend}: dry run, timed")
        started = time.perf_counter()
        planned = await sweep(saver, **policy, dry_run=True)
        dry_seconds = time.perf_counter() - started
        progress(f"{backend}: dry run again, its memory traced")
        tracemalloc.start()
        await sweep(saver, **policy, dry_run=True)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        progress(f"{backend}: sweep")
        started = time.perf_counter()
        done = await sweep(saver, **policy)
        seconds = time.perf_counter() - started
        figures = ("threads_deleted", "threads_pruned", "checkpoints_removed", "bytes_removed")
        for figure in figures:
            assert getattr(planned, figure) == getattr(done, figure), figure
        assert done.threads_deleted == half + 1 and done.threads_pruned == threads - half + 1
        history = CheckpointHistory(saver)
        for thread in ("template-live", f"live-{threads - half - 1:05d}"):
            snapshot = await history.tool_state_at(thread, TURNS)
            assert snapshot.tool_state is not None
            assert snapshot.tool_state[KEY]["value"] == expected(TURNS)
        return {
            "threads": done.threads_seen,
            "deleted": done.threads_deleted,
            "pruned": done.threads_pruned,
            "checkpoints_removed": done.checkpoints_removed,
            "bytes_removed": done.bytes_removed,
            "seconds": seconds,
            "dry_run_seconds": dry_seconds,
            "checkpoints_per_second": done.checkpoints_removed / seconds,
            "threads_per_second": done.threads_seen / seconds,
            "peak_traced_mb": peak / 2**20,
        }


async def measure(backends: list[str], threads: int, workdir: Path) -> dict[str, Any]:
    return {
        backend: await measure_one(backend, threads, workdir)
        for backend in backends
        if backend in ("sqlite", "postgres")
    }


def table(found: dict[str, Any]) -> list[str]:
    lines = [
        "| backend | threads | deleted idle | pruned | checkpoints removed | sweep s "
        "| dry run s | checkpoints/s | threads/s | peak memory (dry run, traced) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for backend, f in found.items():
        lines.append(
            f"| {backend} | {f['threads']:,} | {f['deleted']:,} | {f['pruned']:,} "
            f"| {f['checkpoints_removed']:,} | {f['seconds']:.1f} | {f['dry_run_seconds']:.1f} "
            f"| {f['checkpoints_per_second']:,.0f} | {f['threads_per_second']:,.0f} "
            f"| {f['peak_traced_mb']:.1f} MB |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.sweep")
    parser.add_argument("--threads", type=int, default=None, help="default 10_000")
    parser.add_argument("--quick", action="store_true", help="--threads 500")
    parser.add_argument("--backends", default="sqlite,postgres")
    args = parser.parse_args()
    if args.threads is None:
        args.threads = 500 if args.quick else 10_000
    workdir = RESULTS / "work-sweep"
    workdir.mkdir(parents=True, exist_ok=True)
    found = asyncio.run(measure(args.backends.split(","), args.threads, workdir))
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "sweep.json").write_text(json.dumps(found, indent=1))
    print("\n".join(table(found)))


if __name__ == "__main__":
    main()
