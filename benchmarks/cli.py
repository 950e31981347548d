"""The command line's start-up: ``--version``, ``--help`` and a read, each a fresh process.

A person types these, and scripts call them in loops, so the process's own start-up is what
they wait for. Measured beside the floor of the same work: an interpreter that does nothing,
one that opens the SQLite file and reads one row, and one that imports LangGraph's own
``SqliteSaver`` and reads the thread's newest checkpoint (what any reader of a LangGraph store
does at the least: a read command should cost no more than that). The commands run in turn
within each repetition, so the machine's drift weighs on all of them alike.

    python -m benchmarks.cli [--quick]
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import subprocess
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from .common import quick_repeats, timed_side_by_side

TARGET_S = 0.3
"""``--help`` and ``--version`` answer within this (issue target)."""

SAVER_READ = "LangGraph's SqliteSaver: its newest checkpoint"
"""The floor of a read: LangGraph's own saver, imported, reading the thread's newest checkpoint
(what any reader of a LangGraph store does at the least)."""

READ = "turns (a read)"

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
    from mcp_state_versions.demo import main as demo

    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "demo.sqlite"
        with contextlib.redirect_stdout(io.StringIO()):  # the demo's threads, as a newcomer's
            demo(f"sqlite:{path}", as_json=True)
        thread = asyncio.run(_first_thread(path))
        read = "import sqlite3; sqlite3.connect(sys.argv[1]).execute('SELECT 1 FROM checkpoints')"
        saver_read = (
            "import sqlite3; from langgraph.checkpoint.sqlite import SqliteSaver; "
            "SqliteSaver(sqlite3.connect(sys.argv[1])).get_tuple("
            "{'configurable': {'thread_id': sys.argv[2], 'checkpoint_ns': ''}})"
        )
        return _timed(
            {
                "python -c pass": [sys.executable, "-c", "pass"],
                "--version": [*_SCRIPT, "--version"],
                "--help": [*_SCRIPT, "--help"],
                "sqlite3 open and one row": [
                    sys.executable,
                    "-c",
                    f"import sys; {read}",
                    str(path),
                ],
                SAVER_READ: [sys.executable, "-c", f"import sys; {saver_read}", str(path), thread],
                READ: [*_SCRIPT, "turns", "--checkpointer", f"sqlite:{path}", "--thread", thread],
            },
            repeat,
        )


async def _first_thread(path: Path) -> str:
    from mcp_state_versions import list_threads, open_checkpointer

    async with open_checkpointer(f"sqlite:{path}", read_only=True) as saver:
        return (await list_threads(saver, limit=1)).threads[0].thread_id


def table(figures: dict[str, Any]) -> str:
    rows = ["| command (a fresh process) | median | max |", "| --- | ---: | ---: |"]
    rows += [
        f"| `{name}` | {t['median']:.2f} s | {t['max']:.2f} s |" for name, t in figures.items()
    ]
    return "\n".join(rows)


def main() -> None:
    figures = measure(quick_repeats("python -m benchmarks.cli", 15))
    print(table(figures))
    worst = max(figures[name]["max"] for name in ("--version", "--help"))
    print(f"\n--help and --version: worst {worst:.2f} s (target ≤ {TARGET_S} s)")
    print(
        f"a read ÷ LangGraph's saver reading its newest checkpoint: "
        f"{figures[READ]['median'] / figures[SAVER_READ]['median']:.2f}×"
    )


if __name__ == "__main__":
    main()
