"""Every version of a key rewritten every turn, through the HTTP API, on a long thread.

The tool in :mod:`.common` rewrites ``bench/measure/value`` every turn, so the key has as many
versions as the thread has turns; each one beyond the key's ring is a history read.
``/versions`` lists the newest ``limit`` (100 by default) and names the turn whose page comes
next. Measured: the newest page, a page from the thread's middle (``?turn=T/2``), and every
page one after another, each against the API's 4 s deadline.

    python -m benchmarks.versions [--quick] [--turns 10000] [--backends sqlite,postgres]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path
from typing import Any
from uuid import uuid4

import httpx

from mcp_state_versions.api import create_app

from .common import KEY, agent, grow, opened, progress, timed

DEADLINE_MS = 4000.0
"""The API's request deadline: each page must answer within it."""


async def _page(http: httpx.AsyncClient, url: str, turn: int | None) -> dict[str, Any]:
    response = await http.get(url, params={} if turn is None else {"turn": turn})
    assert response.status_code == 200, response.text
    return response.json()


async def measure(backend: str, turns: int, repeat: int, workdir: Path) -> dict[str, Any]:
    """The figures for one backend, on a thread of ``turns`` turns."""
    async with opened(backend, workdir) as (saver, _):
        thread_id = f"versions-{uuid4().hex[:12]}"
        await grow(agent(saver), thread_id, turns)
        transport = httpx.ASGITransport(app=create_app(saver))
        async with httpx.AsyncClient(transport=transport, base_url="http://api") as http:
            url = f"/threads/{thread_id}/state/{KEY}/versions"
            newest = await _page(http, url, None)
            assert newest["versions"] == turns and len(newest["items"]) == 101, newest["versions"]
            middle = turns // 2
            page = await _page(http, url, middle)
            assert page["items"][-1]["value"] == {"turn": middle, "reading": [middle * 0.5] * 8}
            progress(f"{backend}: reading every page of {turns} versions")
            pages, slowest, listed, cursor = 0, 0.0, 0, None
            start = time.perf_counter()
            while True:
                began = time.perf_counter()
                page = await _page(http, url, cursor)
                slowest = max(slowest, (time.perf_counter() - began) * 1000)
                pages += 1
                listed += sum(1 for item in page["items"] if item["status"] == "kept")
                cursor = page["next_turn"]
                if cursor is None:
                    break
            whole_ms = (time.perf_counter() - start) * 1000
            assert listed == turns, listed
            return {
                "turns": turns,
                "newest_page_ms": await timed(lambda: _page(http, url, None), repeat),
                "middle_page_ms": await timed(lambda: _page(http, url, middle), repeat),
                "pages": pages,
                "slowest_page_ms": slowest,
                "every_page_ms": whole_ms,
                "deadline_ms": DEADLINE_MS,
            }


def table(figures: dict[str, Any]) -> str:
    rows = [
        "| backend | turns (= versions) | newest page (median) | page at T/2 (median) "
        "| slowest of all pages | all pages, one after another |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for backend, cell in figures.items():
        rows.append(
            f"| {backend} | {cell['turns']:,} | {cell['newest_page_ms']['median']:.0f} ms "
            f"| {cell['middle_page_ms']['median']:.0f} ms | {cell['slowest_page_ms']:.0f} ms "
            f"| {cell['every_page_ms'] / 1000:.1f} s ({cell['pages']} pages) |"
        )
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.versions")
    parser.add_argument("--quick", action="store_true", help="a 300-turn thread, fewer repeats")
    parser.add_argument("--turns", type=int, default=10_000)
    parser.add_argument("--backends", default="sqlite,postgres")
    args = parser.parse_args()
    turns, repeat = (300, 3) if args.quick else (args.turns, 7)
    figures = {}
    with tempfile.TemporaryDirectory() as workdir:
        for backend in args.backends.split(","):
            figures[backend] = asyncio.run(measure(backend, turns, repeat, Path(workdir)))
    print(json.dumps(figures, indent=2))
    print(table(figures))


if __name__ == "__main__":
    main()
