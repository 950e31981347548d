"""The LangGraph Agent Server, for real: ``langgraph dev`` serving ``examples/agent_server``.

The server runs in its own environment, which this module builds on first use from
``examples/agent_server/requirements.txt`` plus this project (``.venv-agent-server``, rebuilt
when either file changes): ``langgraph-api`` pins ``jsonschema-rs`` below what the ``dev``
extra's schemathesis needs, so the two cannot share one environment. The server is started on
127.0.0.1 and stopped by its process id; clients send plain ``{"messages": [...]}`` inputs
through ``langgraph-sdk``, as any client of a deployment does.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client

ROOT = Path(__file__).parents[1]
EXAMPLE = ROOT / "examples" / "agent_server"
ENV = ROOT / ".venv-agent-server"
BBOX = "gazet/get_aoi/bbox"


def _server_env() -> Path:
    """The server's environment, built (or rebuilt) from the project's own files."""
    wanted = hashlib.sha256(
        (EXAMPLE / "requirements.txt").read_bytes() + (ROOT / "pyproject.toml").read_bytes()
    ).hexdigest()
    marker = ENV / "built-from"
    if marker.exists() and marker.read_text() == wanted:
        return ENV
    shutil.rmtree(ENV, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(ENV)], check=True)
    subprocess.run(
        [
            str(ENV / "bin" / "pip"),
            "install",
            "-q",
            "-r",
            str(EXAMPLE / "requirements.txt"),
            "-e",
            f"{ROOT}[agents,api]",
        ],
        check=True,
    )
    marker.write_text(wanted)
    return ENV


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


LOGS: dict[str, Path] = {}
"""Each running server's log, by its URL."""

WORKDIRS: dict[str, Path] = {}
"""Each running server's working directory (the SQLite file's, for the library's saver)."""


def _run_server(workdir: Path, config: str) -> Iterator[str]:
    """``langgraph dev`` on the example copied into ``workdir`` with ``config``, until closed."""
    env = _server_env()
    for name in ("graphs.py", config):
        shutil.copy(EXAMPLE / name, workdir / name)
    port = _free_port()
    log = (workdir / "server.log").open("w")
    process = subprocess.Popen(
        [
            str(env / "bin" / "langgraph"),
            "dev",
            "--config",
            config,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--no-browser",
            "--no-reload",
        ],
        cwd=workdir,
        stdout=log,
        stderr=subprocess.STDOUT,
        env={
            **os.environ,
            "LANGSMITH_TRACING": "false",
            "LANGGRAPH_CLI_NO_ANALYTICS": "1",
        },
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    LOGS[url], WORKDIRS[url] = workdir / "server.log", workdir
    try:
        deadline = time.monotonic() + 90
        while True:
            if process.poll() is not None:
                raise AssertionError(
                    f"langgraph dev exited: {(workdir / 'server.log').read_text()}"
                )
            try:
                if httpx.get(f"{url}/ok", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"langgraph dev did not start: {(workdir / 'server.log').read_text()}"
                )
            time.sleep(0.5)
        yield url
    finally:
        if process.poll() is None:  # (one that exited has told its cause above)
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        log.close()


@pytest.fixture(scope="module")
def own_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The example on the server's own checkpointer (``langgraph.json``)."""
    yield from _run_server(tmp_path_factory.mktemp("agent-server"), "langgraph.json")


@pytest.fixture(scope="module")
def library_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The example on the library's SQLite saver as the server's checkpointer
    (``langgraph.sqlite.json``)."""
    yield from _run_server(tmp_path_factory.mktemp("agent-server"), "langgraph.sqlite.json")


@pytest.fixture(params=["own_server", "library_server"])
def server(request: pytest.FixtureRequest) -> str:
    """Each of the two servers in turn."""
    return str(request.getfixturevalue(request.param))


async def _conversation(url: str, graph: str) -> tuple[str, dict[str, str]]:
    client = get_client(url=url)
    thread = await client.threads.create()
    replies: dict[str, str] = {}
    for text in ["find Copenhagen", "find Aarhus", "list", "turn 1", "turn 9"]:
        out: Any = await client.runs.wait(
            thread["thread_id"], graph, input={"messages": [{"role": "user", "content": text}]}
        )
        tools = [m for m in out["messages"] if m["type"] == "tool"]
        replies[text] = tools[-1]["content"]
    return thread["thread_id"], replies


@pytest.mark.parametrize(
    ("graph", "source"), [("build_agent", "ring"), ("create_agent", "history")]
)
async def test_the_agent_server_runs_the_library(server: str, graph: str, source: str) -> None:
    thread_id, replies = await _conversation(server, graph)
    assert replies["find Aarhus"].startswith(
        f"[state updated: {BBOX}, gazet/get_aoi/name — each replaces the value it held since "
        "turn 1] [unchanged: gazet/get_aoi/country]"
    )
    assert f"{BBOX}: list[4] of 9.9 — rewritten, 2 versions" in replies["list"]
    assert replies["turn 1"] == (
        f"{BBOX} at the end of turn 1 (held turn 1). A later turn replaced it; the current "
        "value differs.\n[12.4, 55.5, 12.7, 55.8]"
    )
    assert replies["turn 9"].startswith("Turn 9 never happened: this thread has had 5 turns")
    # The HTTP API mounted in the server under /session-state reads the server's checkpointer;
    # "source" says the ring answered for build_agent, the server's history for create_agent.
    read = httpx.get(f"{server}/session-state/threads/{thread_id}/state/{BBOX}", params={"turn": 1})
    assert read.status_code == 200, read.text
    assert read.json()["value"] == [12.4, 55.5, 12.7, 55.8]
    assert read.json()["source"] == source
    # The server's own state route is not shadowed by the mounted app.
    own = httpx.get(f"{server}/threads/{thread_id}/state")
    assert own.status_code == 200 and "values" in own.json()
    # The timeline page is served at the mounted app's root, and asks for its files and data
    # under the same prefix; its timeline of this thread has the key rewritten in turn 3.
    page = httpx.get(f"{server}/session-state/")
    assert page.status_code == 200 and '<base href="/session-state/">' in page.text
    assert httpx.get(f"{server}/session-state/static/page.js").status_code == 200
    timeline = httpx.get(f"{server}/session-state/threads/{thread_id}/timeline").json()
    row = next(k for k in timeline["keys"] if k["key"] == BBOX)
    assert row["starts"] == [1, 2] and row["first_written"] == 1
    # Each turn's own conversation, on the server's runs (not run_turn): never the next one's.
    for turn, place in [(1, "Copenhagen"), (2, "Aarhus")]:
        said = httpx.get(f"{server}/session-state/threads/{thread_id}/turns/{turn}").json()
        assert (said["user"], said["reply"], said["open"]) == (f"find {place}", "done", False)
        assert [(c["tool"], c["args"]) for c in said["calls"]] == [("get_aoi", {"place": place})]


def test_the_mounted_app_runs_the_background_sweeper(server: str) -> None:
    """Under the Agent Server the example app's lifespan sweeps the server's own
    checkpointer on the schedule ``langgraph.json`` sets (its first sweep at startup, then
    hourly; thirty days idle and 200 turns remove nothing the tests here write), and logs
    each sweep."""
    deadline = time.monotonic() + 30
    while "swept" not in LOGS[server].read_text():
        assert time.monotonic() < deadline, LOGS[server].read_text()[-3000:]
        time.sleep(0.5)
    assert "sweeping every" in LOGS[server].read_text()


PRUNE_AS_THE_SERVER_DOES = """
import asyncio, sys
from langgraph_api._checkpointer._adapter import (
    CheckpointerCapabilities, _CustomCheckpointerAdapter,
)
from mcp_state_versions.savers.sqlite import PruningSqliteSaver

async def main(path, *threads):
    async with PruningSqliteSaver.from_conn_string(path) as saver:
        capabilities = CheckpointerCapabilities.from_type(type(saver))
        assert capabilities.has_aprune, "the server would not call the saver's aprune"
        adapter = _CustomCheckpointerAdapter(saver, capabilities)
        await adapter.aprune(list(threads), strategy="keep_latest")

asyncio.run(main(*sys.argv[1:]))
"""
"""The call a deployment's ``POST /threads/prune`` and thread TTL make with a custom
checkpointer: ``aprune`` through the server's own adapter (``langgraph_api``'s
``_CustomCheckpointerAdapter``, which calls the saver's ``aprune`` where it has one)."""


def _checkpoints(path: Path, thread_id: str) -> int:
    with sqlite3.connect(path) as db:
        (count,) = db.execute(
            "SELECT count(*) FROM checkpoints WHERE thread_id = ?", (thread_id,)
        ).fetchone()
    return int(count)


async def _ask(url: str, thread_id: str, graph: str, text: str) -> str:
    out: Any = await get_client(url=url).runs.wait(
        thread_id, graph, input={"messages": [{"role": "user", "content": text}]}
    )
    return str([m for m in out["messages"] if m["type"] == "tool"][-1]["content"])


@pytest.mark.parametrize(("graph", "ring"), [("build_agent", True), ("create_agent", False)])
async def test_keep_latest_on_the_library_saver_leaves_the_servers_threads_whole(
    library_server: str, graph: str, ring: bool
) -> None:
    """The server stores its threads in the library's SQLite file. ``langgraph dev``'s
    in-memory runtime refuses ``keep_latest`` itself (422, before any checkpointer is asked)
    and reports storage for its built-in checkpointer only (501); a deployment's prune and TTL
    call the saver's ``aprune`` through the server's adapter, which this test makes as the
    server makes it, on the live file. After it the thread keeps one checkpoint, its head,
    its ``tool_state`` versions and its conversation; the ring still answers turn 1, the walk
    says turn 1 is no longer retained, and the thread goes on."""
    url = library_server
    thread_id, _ = await _conversation(url, graph)
    sqlite_file = WORKDIRS[url] / "threads.sqlite"
    assert _checkpoints(sqlite_file, thread_id) > 5  # the server stores in the library's file
    client = get_client(url=url)
    before = (await client.threads.get_state(thread_id))["values"]

    refused = httpx.post(
        f"{url}/threads/prune", json={"thread_ids": [thread_id], "strategy": "keep_latest"}
    )
    assert refused.status_code == 422 and "in-memory runtime" in refused.text
    assert httpx.get(f"{url}/threads/{thread_id}/storage").status_code == 501

    subprocess.run(
        [str(ENV / "bin" / "python"), "-c", PRUNE_AS_THE_SERVER_DOES, str(sqlite_file), thread_id],
        check=True,
        env={**os.environ, "REDIS_URI": "unused", "DATABASE_URI": ":memory:"},
    )
    assert _checkpoints(sqlite_file, thread_id) == 1
    after = (await client.threads.get_state(thread_id))["values"]
    assert after["tool_state"] == before["tool_state"]
    assert after["messages"] == before["messages"]

    listing = await _ask(url, thread_id, graph, "list")
    assert f"{BBOX}: list[4] of 9.9 — rewritten, 2 versions" in listing
    turn_1 = await _ask(url, thread_id, graph, "turn 1")
    if ring:
        assert turn_1.endswith("\n[12.4, 55.5, 12.7, 55.8]"), turn_1
    else:
        assert turn_1.startswith("Turn 1 is no longer retained"), turn_1
    assert (await _ask(url, thread_id, graph, "find Copenhagen")).startswith(
        f"[state updated: {BBOX}, gazet/get_aoi/name — each replaces the value it held since "
        "turn 2]"
    )
    assert (await _ask(url, thread_id, graph, "turn 7")).endswith(
        "(held turns 2–7). A later turn replaced it; the current value differs.\n"
        "[9.9, 56.1, 10.3, 56.2]"
    )


async def test_the_servers_delete_prune_removes_the_thread_from_the_library_saver(
    library_server: str,
) -> None:
    url = library_server
    thread_id, _ = await _conversation(url, "build_agent")
    pruned = httpx.post(
        f"{url}/threads/prune", json={"thread_ids": [thread_id], "strategy": "delete"}
    )
    assert pruned.status_code == 200, pruned.text
    assert _checkpoints(WORKDIRS[url] / "threads.sqlite", thread_id) == 0
