"""The timeline page in a real browser (Playwright driving Debian's chromium), used as a person
would: behind the token, from the thread list to a cell's value and its diff, by mouse and by
keyboard, against ``mcp-state-versions serve`` on a SQLite file."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from mcp_state_versions.agent.build import run_turn
from mcp_state_versions.retention.prune import prune_thread
from mcp_state_versions.savers.specs import open_checkpointer

from ..helpers import BBOX, agent_on, cli_command, free_port, wait_for_http
from ..walk.test_conversation import TURNS, _summarized_agent

CHROMIUM = os.environ.get("MCP_STATE_VERSIONS_CHROMIUM", "/usr/bin/chromium")
TOKEN = "page-test-token"
THREAD = "areas-of-interest"
SCREENSHOTS = os.environ.get("MCP_STATE_VERSIONS_SCREENSHOTS")
"""A directory to save the page's screenshots in (docs/ is made this way); unset: none."""

# CI sets MCP_STATE_VERSIONS_REQUIRE_BROWSER=1: there a missing browser fails, not skips.
pytestmark = pytest.mark.skipif(
    not shutil.which(CHROMIUM) and os.environ.get("MCP_STATE_VERSIONS_REQUIRE_BROWSER") != "1",
    reason=f"no browser at {CHROMIUM} (apt-get install chromium)",
)

KNOWN = "known-after-prune"
SUMMARIZED = "summarized-areas"
"""A create_agent thread (ainvoke) whose early turns a summary took out of its messages."""
"""A thread pruned to its last turn whose key has held one value since turn 1: the pruned turns
are still known, from the key's own entry."""

LATE = "keys-set-later"
"""A thread whose keys were first set in turn 2: turn 1 draws them as not set yet."""

ODD_IDS = ("..", "user/42")
"""Thread ids a URL path resolves or splits unless written with care."""

# Turns: 1 chat, 2 Copenhagen, 3 chat, 4 Aarhus, 5 chat, 6 Oslo, 7 chat; then turns 1–2 pruned.
SCRIPT = ["chat", "find Copenhagen", "chat", "find Aarhus", "chat", "find Oslo", "chat"]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``serve`` with a token, on a file holding one thread and a second to filter away."""
    path = tmp_path_factory.mktemp("page") / "threads.sqlite"
    spec = f"sqlite:{path}"

    async def write() -> None:
        async with open_checkpointer(spec) as saver:
            agent = agent_on(saver, ring_size=1)
            for text in SCRIPT:
                await run_turn(agent, THREAD, text)
            await run_turn(agent, "another-thread", "find Oslo")
            for text in ("chat", "find Oslo"):
                await run_turn(agent, LATE, text)
            for odd in ODD_IDS:
                await run_turn(agent, odd, "find Oslo")
            await prune_thread(saver, THREAD, keep_turns=5)
            for text in ("find Copenhagen", "chat", "chat"):
                await run_turn(agent, KNOWN, text)
            await prune_thread(saver, KNOWN, keep_turns=1)
            summarized = _summarized_agent(saver)  # driven as create_agent agents are
            config = {"configurable": {"thread_id": SUMMARIZED}}
            for text in TURNS:
                await summarized.ainvoke({"messages": [("user", text)]}, config)

    # In a thread of its own: Playwright's sync API keeps an event loop running in this one.
    with ThreadPoolExecutor(1) as writer:
        writer.submit(asyncio.run, write()).result()
    with free_port() as port:
        server = subprocess.Popen(
            [*cli_command(), "serve", "--checkpointer", spec, "--port", str(port)],
            env={**os.environ, "MCP_STATE_VERSIONS_API_TOKEN": TOKEN},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    try:
        url = f"http://127.0.0.1:{port}/"
        assert wait_for_http(url, server).status_code == 200
        yield url
    finally:
        server.terminate()
        server.wait(timeout=10)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda error: errors.append(str(error)))
    yield opened
    context.close()
    assert errors == []  # the script never failed


def signed_in(page: Any, url: str) -> Any:
    page.goto(url)
    page.get_by_label("This server needs its API token.").fill(TOKEN)
    page.get_by_role("button", name="Use token").click()
    page.get_by_role("link", name=THREAD).wait_for()
    return page


def cell(page: Any, key: str, turn: int) -> Any:
    return page.get_by_role("gridcell", name=f"{key}, turn {turn}:")


def shot(page: Any, name: str) -> None:
    if SCREENSHOTS:
        page.screenshot(path=str(Path(SCREENSHOTS) / name), full_page=True)


def test_the_page_asks_for_the_token_and_a_wrong_one_is_refused(page: Any, served: str) -> None:
    page.goto(served)
    page.get_by_text("Sign in to read this server's threads.").wait_for()
    page.get_by_label("This server needs its API token.").fill("wrong")
    page.get_by_role("button", name="Use token").click()
    page.get_by_text("Sign in to read this server's threads.").wait_for()
    assert page.get_by_role("link", name=THREAD).count() == 0


def test_threads_list_filter_and_the_grid(page: Any, served: str) -> None:
    signed_in(page, served)
    assert page.get_by_role("link", name="another-thread").is_visible()
    shot(page, "page-threads.png")
    page.get_by_label("Thread id contains").fill("areas")
    page.get_by_role("button", name="Filter").click()
    page.get_by_role("link", name="another-thread").wait_for(state="detached")
    page.get_by_role("link", name=THREAD).click()

    page.get_by_role("grid", name="Keys by turn").wait_for()
    assert page.get_by_role("heading", level=2).inner_text() == f"{THREAD} · 7 turns · 3 keys"
    classes = {turn: cell(page, BBOX, turn).get_attribute("class") for turn in range(1, 8)}
    # Turns 1–2 pruned; Aarhus rewrote the key in turn 4 and Oslo in 6; the rest held it.
    assert classes == {
        1: "pruned",
        2: "pruned",
        3: "held",
        4: "rewritten",
        5: "held",
        6: "rewritten",
        7: "held",
    }


def test_a_click_shows_the_value_and_the_diff_against_the_previous_version(
    page: Any, served: str
) -> None:
    signed_in(page, served).goto(f"{served}#/thread/{THREAD}")
    cell(page, BBOX, 6).click()
    detail = page.locator("#detail")
    detail.get_by_role("heading", name=f"{BBOX} at the end of turn 6").wait_for()
    detail.get_by_text("Changes from the version at turn 5").wait_for()
    assert '"10.6"' not in detail.inner_text()  # numbers, as JSON
    removed = detail.locator("del").all_inner_texts()
    added = detail.locator("ins").all_inner_texts()
    assert "-   9.9," in removed and "+   10.6," in added, (removed, added)
    shot(page, "page-thread.png")


def test_the_grid_is_used_from_the_keyboard(page: Any, served: str) -> None:
    signed_in(page, served).goto(f"{served}#/thread/{THREAD}")
    page.get_by_role("grid", name="Keys by turn").wait_for()
    # Tab reaches the grid's one focusable cell: the first key at the latest turn.
    for _ in range(20):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.getAttribute('role')") == "gridcell":
            break
    focused = page.evaluate("document.activeElement.getAttribute('aria-label')")
    assert focused == f"{BBOX}, turn 7: held"
    for key in ["ArrowLeft", "ArrowLeft", "ArrowLeft", "Enter"]:
        page.keyboard.press(key)
    detail = page.locator("#detail")
    detail.get_by_role("heading", name=f"{BBOX} at the end of turn 4").wait_for()
    # Turn 4's version replaced the one held at the end of turn 3 (Copenhagen).
    detail.get_by_text("Changes from the version at turn 3").wait_for()
    assert "-   12.4," in detail.locator("del").all_inner_texts()
    assert "+   9.9," in detail.locator("ins").all_inner_texts()
    page.keyboard.press("Home")  # the first turn shown: a pruned one, answered as pruned
    page.keyboard.press("Enter")
    detail.get_by_role("heading", name=f"{BBOX} at the end of turn 1").wait_for()
    # An answer about the turn, told as a note as the tool tells the model: not a failure.
    answer = detail.locator(".answer")
    answer.wait_for()
    assert "turn 1 is no longer retained" in answer.inner_text()
    assert detail.get_by_role("alert").count() == 0
    page.get_by_role("columnheader", name="turn 1").hover()
    panel = page.get_by_role("complementary", name="The turn")
    panel.locator(".answer").wait_for()
    assert "no longer retained" in panel.inner_text() and panel.get_by_role("alert").count() == 0


def test_the_thread_list_reads_well(page: Any, served: str) -> None:
    """Times are relative with the exact time on hover, and nothing stray is printed under
    the table (it printed a literal null)."""
    signed_in(page, served)
    row = page.get_by_role("row").filter(has=page.get_by_role("link", name=THREAD))
    written = row.get_by_role("cell").nth(2)
    # (the fixture wrote the threads a while before, however long: relative, whatever the time)
    assert re.fullmatch(r"just now|\d+ (min|h) ago|\d+ days? ago", written.inner_text())
    assert written.get_attribute("title").startswith("20")  # the exact ISO time
    assert "null" not in page.locator("main").inner_text()


def test_every_turn_is_labelled_and_pointing_at_one_tells_what_it_was(
    page: Any, served: str
) -> None:
    signed_in(page, served).goto(f"{served}#/thread/{THREAD}")
    page.get_by_role("grid", name="Keys by turn").wait_for()
    headers = page.get_by_role("columnheader").all_inner_texts()
    assert headers[1:] == [str(turn) for turn in range(1, 8)]
    cell(page, BBOX, 6).hover()
    panel = page.get_by_role("complementary", name="The turn")
    panel.get_by_role("heading", name="Turn 6").wait_for()
    text = panel.inner_text()
    assert "User: find Oslo" in text and 'get_aoi({"place":"Oslo"})' in text, text
    assert "Reply: " in text and "(no reply)" not in text
    page.get_by_role("columnheader", name="turn 3").hover()
    panel.get_by_role("heading", name="Turn 3").wait_for()
    assert "User: chat" in panel.inner_text()


def test_a_cell_says_which_call_wrote_it_in_words_an_operator_reads(page: Any, served: str) -> None:
    signed_in(page, served).goto(f"{served}#/thread/{THREAD}")
    cell(page, BBOX, 5).click()
    detail = page.locator("#detail")
    detail.get_by_text("Written in turn 4 by").wait_for()
    assert 'get_aoi({"place":"Aarhus"})' in detail.inner_text()
    assert "ring" not in detail.inner_text()  # "read from the key's recent versions"
    # The turn selected is shown beside it, as on hover.
    panel = page.get_by_role("complementary", name="The turn")
    panel.get_by_role("heading", name="Turn 5").wait_for()


def test_any_two_versions_of_a_key_are_compared(page: Any, served: str) -> None:
    signed_in(page, served).goto(f"{served}#/thread/{THREAD}")
    cell(page, BBOX, 7).click()
    page.locator("#detail").get_by_text("Written in turn 6 by").wait_for()
    cell(page, BBOX, 3).click(modifiers=["Shift"])
    detail = page.locator("#detail")
    detail.get_by_role("heading", name="Changes from turn 3 to turn 7").wait_for()
    assert "-   12.4," in detail.locator("del").all_inner_texts()  # Copenhagen's
    assert "+   10.6," in detail.locator("ins").all_inner_texts()  # Oslo's


def test_a_pruned_turn_still_known_is_drawn_apart_and_reads(page: Any, served: str) -> None:
    signed_in(page, served).goto(f"{served}#/thread/{KNOWN}")
    page.get_by_role("grid", name="Keys by turn").wait_for()
    assert cell(page, BBOX, 1).get_attribute("class") == "pruned-known"
    assert "still hold its value" in cell(page, BBOX, 1).get_attribute("title")
    cell(page, BBOX, 1).click()
    detail = page.locator("#detail")
    detail.get_by_role("heading", name=f"{BBOX} at the end of turn 1").wait_for()
    detail.get_by_text("12.4").first.wait_for()
    assert detail.get_by_role("alert").count() == 0


@pytest.mark.parametrize("thread_id", ODD_IDS)
def test_a_thread_whose_id_is_dots_or_holds_a_slash_opens(
    page: Any, served: str, thread_id: str
) -> None:
    signed_in(page, served)
    page.get_by_role("link", name=thread_id, exact=True).click()
    heading = page.get_by_role("heading", level=2)
    heading.get_by_text(f"{thread_id} · 1 turn").wait_for()
    cell(page, BBOX, 1).click()
    page.locator("#detail").get_by_role("heading", name=f"{BBOX} at the end of turn 1").wait_for()
    page.locator("#detail").get_by_text("59.8").first.wait_for()  # the thread's own value


def test_a_turn_a_summary_removed_shows_its_own_conversation(page: Any, served: str) -> None:
    """On a thread driven with ``ainvoke`` whose early turns a summary took out of state, each
    turn's panel shows what was said in it, a summary written in a turn is labelled as one,
    and a turn without calls shows no stray null."""
    signed_in(page, served).goto(f"{served}#/thread/{SUMMARIZED}")
    page.get_by_role("grid", name="Keys by turn").wait_for()
    panel = page.get_by_role("complementary", name="The turn")
    page.get_by_role("columnheader", name="turn 1").hover()
    panel.get_by_role("heading", name="Turn 1").wait_for()
    text = panel.inner_text()
    assert "User: find Copenhagen" in text and "Reply: done" in text, text
    page.get_by_role("columnheader", name="turn 2").hover()
    panel.get_by_role("heading", name="Turn 2").wait_for()
    text = panel.inner_text()
    assert "User: chat" in text and "Reply: noted" in text and "null" not in text, text
    labelled = []
    for turn in range(3, len(TURNS) + 1):
        page.get_by_role("columnheader", name=f"turn {turn}").hover()
        panel.get_by_role("heading", name=f"Turn {turn}").wait_for()
        text = panel.inner_text()
        assert f"User: {TURNS[turn - 1]}" in text, text
        assert "Here is a summary" not in text.split("Summary written")[0], text
        labelled.append("Summary written in this turn: " in text)
    assert any(labelled)
    shot(page, "page-summarized-turn.png")


def test_no_cell_is_selected_before_one_is_chosen(page: Any, served: str) -> None:
    """The page opens with the panel saying "Choose a cell" and no cell outlined as chosen;
    the one clicked is the one selected, and a one-turn version reads "held turn N"."""
    signed_in(page, served).goto(f"{served}#/thread/{THREAD}")
    page.get_by_role("grid", name="Keys by turn").wait_for()
    assert "Choose a cell" in page.locator("#detail").inner_text()
    assert page.locator('td[aria-selected="true"]').count() == 0
    cell(page, BBOX, 4).click()
    page.locator("#detail").get_by_text("Written in turn 4 by").wait_for()
    assert page.locator('td[aria-selected="true"]').count() == 1
    assert cell(page, BBOX, 4).get_attribute("aria-selected") == "true"
    assert "held turns 4–4" not in page.locator("#detail").inner_text()


def test_the_api_docs_are_served_by_the_app_and_ask_for_the_token(page: Any, served: str) -> None:
    """The reference is Swagger UI and ReDoc from the app's own files: nothing is fetched from
    elsewhere (a CDN would leave them blank offline; ReDoc's one link to its maker's logo is
    refused by the page's policy), the schema behind the token is read once the token is
    given (a wrong one is refused), and Swagger UI's "Try it out" sends it."""
    elsewhere: list[str] = []
    refused: list[str] = []
    own = (served, f"blob:{served.rstrip('/')}")  # (ReDoc runs a worker from a blob of its own)
    page.on("request", lambda r: None if r.url.startswith(own) else elsewhere.append(r.url))
    page.on("requestfailed", lambda r: refused.append(f"{r.url} {r.failure}"))
    page.goto(served)
    page.get_by_role("link", name="API docs").click()
    page.get_by_label("This server needs its API token.").fill("wrong")
    page.get_by_role("button", name="Use token").click()
    page.get_by_text("That token was refused.").wait_for()
    page.get_by_label("This server needs its API token.").fill(TOKEN)
    page.get_by_role("button", name="Use token").click()
    operation = page.locator(".opblock-summary", has_text="/threads").first
    operation.wait_for()
    shot(page, "docs.png")
    operation.click()
    page.get_by_role("button", name="Try it out").click()
    with page.expect_response(lambda r: "/threads?" in r.url or r.url.endswith("/threads")) as r:
        page.get_by_role("button", name="Execute").click()
    assert r.value.status == 200
    assert r.value.request.headers.get("authorization") == f"Bearer {TOKEN}"
    assert elsewhere == []

    page.get_by_role("link", name="ReDoc").click()  # the token is kept in the tab
    page.get_by_role("heading", name="Threads, newest first").wait_for()
    shot(page, "redoc.png")
    assert all(url in " ".join(refused) for url in elsewhere), (elsewhere, refused)
    assert all(line.endswith(" csp") for line in refused if not line.startswith(own)), refused


def test_the_grid_reads_at_a_glance_and_every_colour_is_in_the_legend(
    page: Any, served: str
) -> None:
    """Cells and turn labels are big enough to point at and read in a 1,400 px window, and
    the legend names every colour a cell can have, "not set yet" (white) included."""
    page.set_viewport_size({"width": 1400, "height": 900})
    signed_in(page, served).goto(f"{served}#/thread/{LATE}")
    page.get_by_role("grid", name="Keys by turn").wait_for()
    assert cell(page, BBOX, 1).get_attribute("class") == "unset"
    legend = page.locator(".legend").inner_text().split("\n")
    drawn = {
        cls
        for cls in page.eval_on_selector_all(
            "table.grid td", "cells => cells.map(c => c.className)"
        )
    }
    words = {"written", "rewritten", "held", "pruned-known", "pruned", "unset", "evicted"}
    assert drawn <= words, drawn
    assert [line.strip() for line in legend if line.strip()] == [
        "written",
        "rewritten",
        "held",
        "pruned, value still known",
        "pruned",
        "not set yet",
        "evicted",
    ]
    box = page.locator("table.grid td").first.bounding_box()
    assert box["width"] >= 22 and box["height"] >= 22, box
    size = page.eval_on_selector(
        "table.grid thead th[data-turn]", "h => getComputedStyle(h).fontSize"
    )
    assert float(size.removesuffix("px")) >= 11, size
    shot(page, "page-legend.png")
