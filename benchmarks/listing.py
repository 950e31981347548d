"""The thread listing under many clients: statements a page, and 50 clients polling it.

A store of ``--threads`` threads (3 turns each) is served by ``mcp-state-versions serve``.
Measured:

* the statements one page of 50 costs, the first time its threads are listed and after
  (counted in this process, on the same store);
* 50 clients, each asking for the first page and the one after it over and over for
  ``--seconds``, while a writer runs a turn on one of the threads every 50 ms (so newest
  checkpoints move and pages change): how many requests were answered 503 (the server's
  4 s deadline) or anything but 200, and the latency's median, 99th percentile and maximum.

    python -m benchmarks.listing [--quick] [--threads 500] [--seconds 30]
                                 [--backends sqlite,postgres]

Each PostgreSQL run uses a database of its own, dropped at the end, so other threads on the
server are not listed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from uuid import uuid4

import httpx

from mcp_state_versions import run_turn
from mcp_state_versions.backends import backend_for
from mcp_state_versions.savers.specs import open_checkpointer
from mcp_state_versions.walk.threads import list_threads

from .common import PG_DSN, agent, analyzed, progress

CLIENTS = 50
PAGE = 50
TURNS = 3
WRITE_EVERY_S = 0.05


@asynccontextmanager
async def _store(backend: str, workdir: Path) -> AsyncIterator[str]:
    """A checkpointer spec holding nothing yet: a new SQLite file, or a PostgreSQL database."""
    if backend == "sqlite":
        yield f"sqlite:{workdir / f'{uuid4().hex}.sqlite'}"
        return
    import psycopg

    name = f"listing_{uuid4().hex[:12]}"
    admin = await psycopg.AsyncConnection.connect(PG_DSN, autocommit=True)
    await admin.execute(f"CREATE DATABASE {name}")
    try:
        yield f"postgres:{PG_DSN.rsplit('/', 1)[0]}/{name}"
    finally:
        await admin.execute(f"DROP DATABASE {name} WITH (FORCE)")
        await admin.close()


async def _statements(saver: Any) -> list[int]:
    """Statements a first page costs: listed for the first time, then again."""
    backend = type(backend_for(saver))
    rows = backend._rows  # type: ignore[attr-defined]
    counted: list[str] = []

    async def recording(self: Any, sql: str, params: Any) -> Any:
        counted.append(sql)
        return await rows(self, sql, params)

    backend._rows = recording  # type: ignore[attr-defined]
    try:
        found = []
        for _ in range(2):
            counted.clear()
            await list_threads(saver, limit=PAGE)
            found.append(len(counted))
        return found
    finally:
        backend._rows = rows  # type: ignore[attr-defined]


async def _client(url: str, until: float, latencies: list[float], codes: dict[int, int]) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        cursor: str | None = None
        while time.perf_counter() < until:
            params: dict[str, Any] = {"limit": PAGE, **({"before": cursor} if cursor else {})}
            began = time.perf_counter()
            response = await http.get("/threads", params=params)
            latencies.append((time.perf_counter() - began) * 1000)
            codes[response.status_code] = codes.get(response.status_code, 0) + 1
            body = response.json() if response.status_code == 200 else {}
            cursor = None if cursor else body.get("next")  # the first page, the next, again


async def _writer(saver: Any, threads: list[str], until: float) -> int:
    graph, written = agent(saver), 0
    while time.perf_counter() < until:
        await run_turn(graph, threads[written % len(threads)], f"measure {TURNS + 1 + written}")
        written += 1
        await asyncio.sleep(WRITE_EVERY_S)
    return written


def _serve(spec: str, port: int) -> subprocess.Popen[bytes]:
    script = Path(sys.executable).with_name("mcp-state-versions")
    return subprocess.Popen(
        [str(script), "serve", "--checkpointer", spec, "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


async def measure(backend: str, threads: int, seconds: float, workdir: Path) -> dict[str, Any]:
    async with _store(backend, workdir) as spec, open_checkpointer(spec) as saver:
        progress(f"listing, {backend}: {threads} threads of {TURNS} turns")
        names = [f"listed-{n:05d}" for n in range(threads)]
        graph = agent(saver)
        for name in names:
            for turn in range(1, TURNS + 1):
                await run_turn(graph, name, f"measure {turn}")
        await analyzed(saver)
        first, again = await _statements(saver)
        port = 8500 + os.getpid() % 200
        server = _serve(spec, port)
        url = f"http://127.0.0.1:{port}"
        try:
            async with httpx.AsyncClient(base_url=url) as http:
                for _ in range(150):
                    try:
                        await http.get("/threads", params={"limit": 1})
                        break
                    except httpx.TransportError:
                        await asyncio.sleep(0.2)
            progress(f"listing, {backend}: {CLIENTS} clients for {seconds:.0f} s")
            latencies: list[float] = []
            codes: dict[int, int] = {}
            until = time.perf_counter() + seconds
            written, *_ = await asyncio.gather(
                _writer(saver, names, until),
                *(_client(url, until, latencies, codes) for _ in range(CLIENTS)),
            )
        finally:
            server.terminate()
            server.wait(timeout=10)
    ordered = sorted(latencies)
    return {
        "threads": threads,
        "statements_first_page": first,
        "statements_page_again": again,
        "clients": CLIENTS,
        "seconds": seconds,
        "requests": len(latencies),
        "answered_503": codes.get(503, 0),
        "not_200": sum(n for code, n in codes.items() if code != 200),
        "turns_written": written,
        "median_ms": statistics.median(ordered),
        "p99_ms": ordered[int(len(ordered) * 0.99) - 1],
        "max_ms": ordered[-1],
    }


def table(figures: dict[str, Any]) -> str:
    rows = [
        "| backend | threads | statements a page (first / again) | requests in "
        f"{next(iter(figures.values()))['seconds']:.0f} s, {CLIENTS} clients | 503 | not 200 "
        "| median | p99 | max |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for backend, cell in figures.items():
        rows.append(
            f"| {backend} | {cell['threads']:,} | {cell['statements_first_page']} / "
            f"{cell['statements_page_again']} | {cell['requests']:,} | {cell['answered_503']} "
            f"| {cell['not_200']} | {cell['median_ms']:.0f} ms | {cell['p99_ms']:.0f} ms "
            f"| {cell['max_ms']:.0f} ms |"
        )
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.listing")
    parser.add_argument("--quick", action="store_true", help="100 threads, 10 seconds")
    parser.add_argument("--threads", type=int, default=None, help="default 500")
    parser.add_argument("--seconds", type=float, default=None, help="default 30")
    parser.add_argument("--backends", default="sqlite,postgres")
    args = parser.parse_args()
    threads = args.threads or (100 if args.quick else 500)
    seconds = args.seconds or (10.0 if args.quick else 30.0)
    figures = {}
    with tempfile.TemporaryDirectory() as workdir:
        for backend in args.backends.split(","):
            figures[backend] = asyncio.run(measure(backend, threads, seconds, Path(workdir)))
    print(json.dumps(figures, indent=2))
    print(table(figures))


if __name__ == "__main__":
    main()
