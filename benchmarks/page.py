"""The timeline page on a long, wide thread: what it costs to draw and to use.

A thread of ``turns`` turns over 100 keys (``build_agent`` and ``run_turn`` on SQLite; every key
written in turn 1, two of them rewritten each turn after) is served by ``mcp-state-versions
serve``, and Debian's chromium, driven by Playwright, opens it as a person would. Measured:

* the timeline read itself (:func:`mcp_state_versions.walk.resolve.resolve_timeline`, one pass over
  the branch), and the same over HTTP;
* the page: from opening the thread to the grid drawn; one cursor move by the keyboard, in the
  page (forty moves to the right, crossing into the next window of turns, which redraws it);
  a click on a cell to its value and the diff against the previous version shown.

Run alone: ``python -m benchmarks.page --turns 1000``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.prebuilt import ToolRuntime

from mcp_state_versions import build_agent, publish, run_turn
from mcp_state_versions.demo.scripted import ScriptedChatModel, call
from mcp_state_versions.savers.specs import open_checkpointer
from mcp_state_versions.walk.checkpoints import CheckpointHistory
from mcp_state_versions.walk.resolve import resolve_timeline

from .common import RESULTS, progress

KEYS = 100
THREAD = "timeline"
CHROMIUM = os.environ.get("MCP_STATE_VERSIONS_CHROMIUM", "/usr/bin/chromium")
TARGETS = {"ready_s": 2.0, "move_ms": 50.0, "detail_s": 1.0}
"""What "stays quick" means here, at 1,000 turns × 100 keys: the grid drawn within 2 s of
opening the thread, a keyboard move within 50 ms, a cell's value and diff within 1 s."""


@tool
def put(turn: int, runtime: ToolRuntime) -> Any:
    """Write every key in turn 1, then two a turn."""
    chosen = range(KEYS) if turn == 1 else [(turn * 7) % KEYS, (turn * 7 + 50) % KEYS]
    return publish(runtime, "bench", "put", {f"key_{k:03d}": {"turn": turn} for k in chosen})


def _respond(messages: list[BaseMessage]) -> AIMessage:
    last = messages[-1]
    if isinstance(last, HumanMessage):
        return AIMessage("", tool_calls=[call("put", f"p{len(messages)}", turn=int(last.content))])
    return AIMessage("ok" if isinstance(last, ToolMessage) else "noted")


async def _build(spec: str, turns: int) -> float:
    """Build the thread; return the median seconds of the timeline read (5 reads)."""
    async with open_checkpointer(spec) as saver:
        agent = build_agent(ScriptedChatModel(respond=_respond), [put], checkpointer=saver)
        for turn in range(1, turns + 1):
            await run_turn(agent, THREAD, str(turn))
            if turn % 100 == 0:
                progress(f"page: built {turn}/{turns} turns")
        seconds = []
        for _ in range(5):
            started = time.perf_counter()
            found = await resolve_timeline(CheckpointHistory(saver), THREAD)
            seconds.append(time.perf_counter() - started)
        assert found.total == turns and len(found.keys) == KEYS
        assert sum(len(row.starts) for row in found.keys) == KEYS + 2 * (turns - 1)
        return statistics.median(seconds)


def _browse(url: str) -> dict[str, float]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto(url)
        page.get_by_role("link", name=THREAD).wait_for()
        started = time.perf_counter()
        page.get_by_role("link", name=THREAD).click()
        page.get_by_role("grid", name="Keys by turn").wait_for()
        ready = time.perf_counter() - started
        # Forty moves right from ten turns before the end of the window: the eleventh redraws.
        moves_ms = page.evaluate(
            """() => {
              const grid = document.querySelector('table.grid');
              document.querySelector('td[tabindex="0"]').focus();
              const times = [];
              for (let n = 0; n < 40; n++) {
                const key = n < 20 ? 'ArrowLeft' : 'ArrowRight';
                const started = performance.now();
                document.activeElement.dispatchEvent(
                  new KeyboardEvent('keydown', {key, bubbles: true}));
                times.push(performance.now() - started);
              }
              return times;
            }"""
        )
        first = page.locator('td[role="gridcell"]').nth(5)
        started = time.perf_counter()
        first.click()
        page.locator("#detail pre").first.wait_for()
        page.locator("#detail").get_by_text("Changes from the version").or_(
            page.locator("#detail").get_by_text("nothing to compare")
        ).wait_for()
        detail = time.perf_counter() - started
        page.screenshot(path=str(RESULTS / "page.png"))
        browser.close()
    return {
        "ready_s": ready,
        "move_ms": statistics.median(moves_ms),
        "move_max_ms": max(moves_ms),
        "detail_s": detail,
    }


async def measure(turns: int, workdir: Path) -> dict[str, Any]:
    spec = f"sqlite:{workdir / 'page.sqlite'}"
    progress(f"page: a thread of {turns} turns × {KEYS} keys")
    timeline_s = await _build(spec, turns)
    script = Path(sys.executable).with_name("mcp-state-versions")
    port = 8700 + os.getpid() % 200
    server = subprocess.Popen(
        [str(script), "serve", "--checkpointer", spec, "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/"
    try:
        for _ in range(150):
            try:
                httpx.get(url, timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.2)
        started = time.perf_counter()
        body = httpx.get(f"{url}threads/{THREAD}/timeline", timeout=30).json()
        http_s = time.perf_counter() - started
        assert body["total"] == turns
        progress("page: in the browser")
        with ThreadPoolExecutor(1) as browser:  # Playwright's sync API wants a thread of its own
            found = browser.submit(_browse, url).result()
    finally:
        server.terminate()
        server.wait(timeout=10)
    return {"turns": turns, "keys": KEYS, "timeline_s": timeline_s, "http_s": http_s, **found}


def table(found: dict[str, Any]) -> list[str]:
    return [
        "| thread | timeline read | over HTTP | grid drawn (target ≤ 2 s) "
        "| keyboard move, median / max (≤ 50 ms) | value and diff (≤ 1 s) |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
        f"| {found['turns']:,} turns × {found['keys']} keys | {found['timeline_s']:.2f} s "
        f"| {found['http_s']:.2f} s | {found['ready_s']:.2f} s "
        f"| {found['move_ms']:.1f} / {found['move_max_ms']:.1f} ms | {found['detail_s']:.2f} s |",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.page")
    parser.add_argument("--turns", type=int, default=None, help="default 1000")
    parser.add_argument("--quick", action="store_true", help="--turns 100")
    args = parser.parse_args()
    if args.turns is None:
        args.turns = 100 if args.quick else 1000
    workdir = RESULTS / "work-page"
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "page.sqlite").unlink(missing_ok=True)
    found = asyncio.run(measure(args.turns, workdir))
    (RESULTS / "page.json").write_text(json.dumps(found, indent=1))
    print("\n".join(table(found)))


if __name__ == "__main__":
    main()
