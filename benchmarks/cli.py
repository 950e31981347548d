"""The command line's start-up: ``--version``, ``--help`` and a read, each a fresh process.

A person types these, and scripts call them in loops, so the process's own start-up is what
they wait for. Measured beside the floor of the same work: an interpreter that does nothing,
one that opens the SQLite file and reads one row, the same read (``turns``) through the
library's Python API (its connection and its read: what the command should cost at most), and
LangGraph's own saver importing and reading the thread's newest checkpoint (what any reader of a
LangGraph store does at the least), on SQLite and on PostgreSQL. The commands run in turn within
each repetition, so the machine's drift weighs on all of them alike.

    python -m benchmarks.cli [--quick]
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from .common import PG_DSN, quick_repeats, timed_side_by_side

TARGET_S = 0.3
"""``--help`` and ``--version`` answer within this (issue target)."""

SAVER_READ = "LangGraph's SqliteSaver: its newest checkpoint"
"""The floor of any read: LangGraph's own saver, imported, reading the thread's newest
checkpoint (what any reader of a LangGraph store does at the least)."""

API_READ = "the library's API: the same read"
"""The command's own floor: its connection and its read, through the library's Python API in a
fresh process (``open_checkpointer`` read-only, ``CheckpointHistory.turns``)."""

READ = "turns (a read)"

PG_SAVER_READ = "LangGraph's PostgresSaver: its newest checkpoint"
PG_READ = "turns on PostgreSQL (a read)"

_API_READ = """\
import asyncio, sys
from mcp_state_versions import CheckpointHistory, open_checkpointer

async def read():
    async with open_checkpointer(sys.argv[1], read_only=True) as saver:
        print((await CheckpointHistory(saver).turns(sys.argv[2])).total)

asyncio.run(read())
"""

_SQLITE_SAVER_READ = (
    "import sqlite3, sys; from langgraph.checkpoint.sqlite import SqliteSaver; "
    "SqliteSaver(sqlite3.connect(sys.argv[1])).get_tuple("
    "{'configurable': {'thread_id': sys.argv[2], 'checkpoint_ns': ''}})"
)

_PG_SAVER_READ = """\
import sys
from langgraph.checkpoint.postgres import PostgresSaver

with PostgresSaver.from_conn_string(sys.argv[1]) as saver:
    saver.get_tuple({"configurable": {"thread_id": sys.argv[2], "checkpoint_ns": ""}})
"""

_SCRIPT = [sys.executable, "-m", "mcp_state_versions.cli"]


def _installed_env() -> dict[str, str]:
    """The environment of a process run as an installed package runs: with its bytecode.

    ``pip install`` compiles every module it installs, LangGraph's included, so the floor's
    imports read bytecode; a checkout installed in editable mode writes its own on the first
    import, unless ``PYTHONDONTWRITEBYTECODE`` is set (as on some CI machines), when every
    start compiles the library's modules from source again, a cost no installed copy has."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _timed(commands: dict[str, list[str]], repeat: int) -> dict[str, dict[str, float]]:
    """Each of ``commands`` run ``repeat`` times side by side (:func:`timed_side_by_side`: in
    turn within each repetition, the order rotating), in seconds."""
    env = _installed_env()
    for command in commands.values():  # writes the bytecode
        subprocess.run(command, capture_output=True, check=True, env=env)

    def started(command: list[str]) -> Callable[[], Awaitable[None]]:
        async def run() -> None:
            process = await asyncio.create_subprocess_exec(
                *command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
            )
            out, err = await process.communicate()
            if process.returncode:
                raise subprocess.CalledProcessError(process.returncode, command, out, err)

        return run

    found = asyncio.run(
        timed_side_by_side({name: started(c) for name, c in commands.items()}, repeat)
    )
    return {
        name: {"median": t["median"] / 1000, "max": t["max"] / 1000} for name, t in found.items()
    }


def measure(repeat: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "demo.sqlite"
        sqlite = f"sqlite:{path}"
        postgres = f"postgres:{PG_DSN}"
        thread = _demo_thread(sqlite)
        pg_thread = _demo_thread(postgres)
        read = "import sqlite3; sqlite3.connect(sys.argv[1]).execute('SELECT 1 FROM checkpoints')"
        python = sys.executable
        return _timed(
            {
                "python -c pass": [python, "-c", "pass"],
                "--version": [*_SCRIPT, "--version"],
                "--help": [*_SCRIPT, "--help"],
                "sqlite3 open and one row": [python, "-c", f"import sys; {read}", str(path)],
                SAVER_READ: [python, "-c", _SQLITE_SAVER_READ, str(path), thread],
                API_READ: [python, "-c", _API_READ, sqlite, thread],
                READ: [*_SCRIPT, "turns", "--checkpointer", sqlite, "--thread", thread],
                PG_SAVER_READ: [python, "-c", _PG_SAVER_READ, PG_DSN, pg_thread],
                PG_READ: [*_SCRIPT, "turns", "--checkpointer", postgres, "--thread", pg_thread],
            },
            repeat,
        )


def _demo_thread(spec: str) -> str:
    """The demo's first thread, written afresh into ``spec`` (its ids are new each run)."""
    from mcp_state_versions.demo.run import main as demo

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):  # the demo's threads, as a newcomer's
        demo(spec, as_json=True)
    return str(json.loads(printed.getvalue().splitlines()[0])["thread_id"])


def table(figures: dict[str, Any]) -> str:
    rows = ["| command (a fresh process) | median | max |", "| --- | ---: | ---: |"]
    rows += [
        f"| `{name}` | {t['median']:.2f} s | {t['max']:.2f} s |" for name, t in figures.items()
    ]
    return "\n".join(rows)


def main() -> None:
    figures = measure(quick_repeats("python -m benchmarks.cli", 31))
    print(table(figures))
    worst = max(figures[name]["max"] for name in ("--version", "--help"))
    print(f"\n--help and --version: worst {worst:.2f} s (target ≤ {TARGET_S} s)")
    print(summary(figures))


def summary(figures: dict[str, Any]) -> str:
    """The ratios the targets name, from :func:`measure`'s figures."""

    def over(a: str, b: str) -> str:
        return f"{figures[a]['median'] / figures[b]['median']:.2f}×"

    return (
        f"a read ÷ the same read through the library's API: {over(READ, API_READ)} "
        "(target ≤ 1×: its connection and its read)\n"
        f"a read ÷ LangGraph's saver reading its newest checkpoint: {over(READ, SAVER_READ)} "
        f"on SQLite, {over(PG_READ, PG_SAVER_READ)} on PostgreSQL"
    )


if __name__ == "__main__":
    main()
