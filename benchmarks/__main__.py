"""Benchmarks: what versions cost and what they save, measured side by side in one run.

    python -m benchmarks [--quick] [--turns 100,500,1000] [--backends memory,sqlite,postgres]
    python -m benchmarks --report      # re-render the tables and plot from the last run

One module per measurement: :mod:`.reads` (turn reads: ring, walk, physical limit, full
history walk), :mod:`.thread` (the whole thread's bytes stored ÷ added and a turn's time against
its length, beside a plain agent, and with ``durability="exit"``), :mod:`.conversation` (a
turn's conversation read back after summaries, against its one-statement floor), :mod:`.memory` (peak memory of one read), :mod:`.tool` (the tool through a
ToolNode against the cheapest tool), :mod:`.reducer` (per write against a dict merge),
:mod:`.pattern` (the worst pattern on a 1 MB value), :mod:`.close_keys` (a mistyped key's
answer at 5,000 long keys), :mod:`.cli` (the command line's start-up), :mod:`.writes` (what a turn stores and
costs against a plain agent, over keys × sizes, and one 5 MB value rewritten), :mod:`.sweep`
(a sweep over 10,000 threads: time, memory, checkpoints removed per second), :mod:`.listing`
(the thread listing's statements a page, and 50 clients polling it), :mod:`.page`
(the timeline page on a thread of 1,000 turns × 100 keys, in Debian's chromium);
:mod:`.report` renders them. Raw figures go to ``benchmarks/results/latest.json``, the plots
to ``benchmarks/results/latest.png`` (reads) and ``latest-writes.png`` (writes). ``--quick``
uses short threads and takes sixteen to twenty-two minutes here (its 500-key threads still run
to their first snapshot); the full run about forty minutes, sixty once (threads of 1,000 turns
on three backends, 50 measured turns per write cell, and a sweep over 10,000 threads).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import sys
from collections.abc import Sequence
from typing import Any

from . import (
    cli,
    close_keys,
    conversation,
    listing,
    page,
    pattern,
    reads,
    reducer,
    report,
    thread,
    tool,
    writes,
)
from . import sweep as sweeping
from .common import RESULTS, progress


async def _run(args: argparse.Namespace) -> dict[str, Any]:
    lengths = [int(n) for n in args.turns.split(",")]
    repeat = 5 if args.quick else 21
    figures: dict[str, Any] = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "command": f"python -m benchmarks {' '.join(sys.argv[1:])}".strip(),
        "lengths": lengths,
        "reads": {},
        "memory": {},
    }
    workdir = RESULTS / "work"
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    backends = args.backends.split(",")
    for backend in backends:
        figures["reads"][backend], peaks = await reads.measure(backend, lengths, repeat, workdir)
        if peaks:
            figures["memory"][backend] = peaks
    progress("the tool against its floor, the reducer, patterns")
    figures["tool"] = await tool.measure(repeat)
    figures["reducer"] = reducer.measure(repeat)
    figures["pattern"] = pattern.measure(repeat)
    figures["close_keys"] = close_keys.measure(repeat)
    # (its own processes and its demo's event loop, away from this one)
    figures["cli"] = await asyncio.to_thread(cli.measure, 5 if args.quick else 31)
    figures["writes_turns"] = 6 if args.quick else 50
    figures["writes"] = {}
    for backend in backends:
        figures["writes"][backend] = await writes.measure(backend, figures["writes_turns"], workdir)
    if "sqlite" in backends:
        progress("sqlite: one 5 MB value rewritten")
        figures["large_value"] = await writes.measure_large_value(workdir)
    figures["listing_chars"] = writes.listing_chars()
    databases = [b for b in backends if b != "memory"]
    figures["thread"] = await thread.measure(databases, 100 if args.quick else 1000, workdir)
    figures["served"] = await thread.measure_served(databases, 20 if args.quick else 100, workdir)
    if "sqlite" in backends:
        progress("sqlite: a turn's conversation read back after summaries")
        figures["conversation"] = await conversation.measure(
            200 if args.quick else 1000, repeat, workdir
        )
    figures["sweep"] = await sweeping.measure(backends, 500 if args.quick else 10_000, workdir)
    figures["listing"] = {
        backend: await listing.measure(
            backend, 100 if args.quick else 500, 10.0 if args.quick else 30.0, workdir
        )
        for backend in databases
    }
    if shutil.which(page.CHROMIUM):
        figures["page"] = await page.measure(100 if args.quick else 1000, workdir)
    else:
        progress(f"no browser at {page.CHROMIUM} (apt-get install chromium): no page figures")
    shutil.rmtree(workdir, ignore_errors=True)
    return figures


def _render(figures: dict[str, Any]) -> None:
    plotted = report.plot(figures, RESULTS / "latest.png")
    report.plot_writes(figures, RESULTS / "latest-writes.png")
    if figures.get("thread"):
        report.plot_thread(figures["thread"], RESULTS / "latest-thread.png")
    print(report.table(figures))
    if "cli" in figures:
        print(
            "\nThe command line's start-up (python -m benchmarks.cli):\n"
            + cli.table(figures["cli"])
            + "\n\n"
            + cli.summary(figures["cli"])
        )
    if "close_keys" in figures:
        print(
            "\nA mistyped key (python -m benchmarks.close_keys):\n"
            + close_keys.table(figures["close_keys"])
        )
    if "thread" in figures:
        print(
            "\nThe whole thread (python -m benchmarks.thread):\n" + thread.table(figures["thread"])
        )
    if figures.get("served"):
        print(
            f"\n{thread.SERVED} conversations served at once (python -m benchmarks.thread):\n"
            + thread.served_table(figures["served"])
        )
    if figures.get("conversation"):
        print(
            "\nA turn's conversation after summaries (python -m benchmarks.conversation):\n"
            + conversation.table(figures["conversation"])
        )
    if figures.get("listing"):
        print(
            "\nThe thread listing under 50 clients (python -m benchmarks.listing):\n"
            + listing.table(figures["listing"])
        )
    print(
        f"\nRaw figures: {RESULTS / 'latest.json'}"
        + (f"; plot: {RESULTS / 'latest.png'}" if plotted else "")
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--quick", action="store_true", help="short threads: sixteen to twenty-two minutes"
    )
    parser.add_argument(
        "--turns", default=None, help="comma-separated lengths (default 100,500,1000)"
    )
    parser.add_argument("--backends", default="memory,sqlite,postgres")
    parser.add_argument("--report", action="store_true", help="re-render the last run's JSON")
    args = parser.parse_args(argv)
    if args.report:
        _render(json.loads((RESULTS / "latest.json").read_text()))
        return
    if args.turns is None:
        args.turns = "20,100" if args.quick else "100,500,1000"
    figures = asyncio.run(_run(args))
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "latest.json").write_text(json.dumps(figures, indent=1))
    _render(figures)


if __name__ == "__main__":
    main()
