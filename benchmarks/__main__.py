"""Benchmarks: what versions cost and what they save, measured side by side in one run.

    python -m benchmarks [--quick] [--turns 10,100,500] [--backends memory,sqlite,postgres]

Builds real threads through the agent (scripted model) on each backend. Every turn calls a tool
that rewrites one key and republishes a set of static keys. Then, per backend and length:

1. turn reads of turn 1 and turn T-3: the ring lookup, the library's checkpoint walk (ring
   disabled), and the baseline a host uses without this library: a full ``aget_state_history``
   walk taking the newest checkpoint with N human messages;
2. the ``*`` listing with rewrite markers vs the same listing over last-write-wins entries;
3. storage: bytes a thread occupies on each backend, per checkpoint, for ring sizes 0/4/8/16
   vs last-write-wins, and the size of ``tool_state`` itself;
4. reducer cost per write at 10/100/1000 keys vs last-write-wins.

Figures are medians of repeated runs after a warm-up, reported with their spread (min–max).
Writes a Markdown table to stdout, raw figures to ``benchmarks/results/latest.json`` and a plot
to ``benchmarks/results/latest.png``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any
from uuid import uuid4

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.prebuilt import ToolRuntime

from mcp_state_versions import (
    CheckpointHistory,
    build_agent,
    count_turns,
    make_merge_tool_state,
    publish,
    read_state_key,
    resolve_turn,
    run_turn,
)
from mcp_state_versions.checkpointers import open_checkpointer
from mcp_state_versions.scripted import ScriptedChatModel, call

KEY = "bench/measure/value"
STATIC_KEYS = 8
RESULTS = Path(__file__).parent / "results"
PG_DSN = os.environ.get("MCP_STATE_VERSIONS_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")


@tool
def measure(turn: int, runtime: ToolRuntime) -> Any:
    """Publish this turn's measurement (rewritten every turn) and the static keys."""
    fields: dict[str, Any] = {"value": {"turn": turn, "reading": [turn * 0.5] * 8}}
    fields.update({f"static_{i}": {"unit": "m", "scale": i} for i in range(STATIC_KEYS)})
    return publish(runtime, "bench", "measure", fields)


def _respond(messages: Sequence[BaseMessage]) -> AIMessage:
    last = messages[-1]
    if isinstance(last, HumanMessage):
        turn = count_turns(messages)
        return AIMessage("", tool_calls=[call("measure", f"m{len(messages)}", turn=turn)])
    return AIMessage("ok" if isinstance(last, ToolMessage) else "noted")


def _progress(text: str) -> None:
    print(f"  … {text}", file=sys.stderr, flush=True)


async def _timed(fn: Callable[[], Awaitable[Any]], repeat: int) -> dict[str, float]:
    """Median and spread of ``repeat`` runs. Callers run ``fn`` once first, to check its answer;
    that run is the warm-up."""
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        await fn()
        samples.append((time.perf_counter() - start) * 1000)
    return {"median_ms": statistics.median(samples), "min_ms": min(samples), "max_ms": max(samples)}


async def _baseline_read(agent: Any, thread_id: str, turn: int) -> Any:
    """What a host does today: walk all history, newest first, take the first with N humans."""
    config = {"configurable": {"thread_id": thread_id}}
    async for snapshot in agent.aget_state_history(config):
        if count_turns(snapshot.values.get("messages")) == turn:
            return snapshot.values.get("tool_state", {}).get(KEY, {}).get("value")
    return None


async def _bench_reads(spec: str, turns: int, repeat: int) -> dict[str, Any]:
    results: dict[str, Any] = {}
    async with open_checkpointer(spec) as saver:
        ring_agent = build_agent(ScriptedChatModel(respond=_respond), [measure], checkpointer=saver)
        walk_agent = build_agent(
            ScriptedChatModel(respond=_respond), [measure], checkpointer=saver, ring_size=0
        )
        ring_thread, walk_thread = f"ring-{uuid4().hex}", f"walk-{uuid4().hex}"
        started = time.perf_counter()
        for turn in range(1, turns + 1):
            await run_turn(ring_agent, ring_thread, "measure")
            await run_turn(walk_agent, walk_thread, "measure")
            if turn % 50 == 0:
                _progress(f"{spec.split(':')[0]}: built {turn}/{turns} turns")
        results["build_s"] = time.perf_counter() - started
        history = CheckpointHistory(saver)
        ring_state = (
            await ring_agent.aget_state({"configurable": {"thread_id": ring_thread}})
        ).values
        walk_state = (
            await walk_agent.aget_state({"configurable": {"thread_id": walk_thread}})
        ).values
        for label, asked in (("turn 1", 1), ("turn T-3", max(turns - 3, 1))):
            expected = {"turn": asked, "reading": [asked * 0.5] * 8}

            # Both readers start from the state the tool already holds (runtime.state).
            async def ring_read(asked: int = asked) -> Any:
                return await resolve_turn(ring_state["tool_state"], KEY, asked, current_turn=turns)

            async def walk_read(asked: int = asked) -> Any:
                return await resolve_turn(
                    walk_state["tool_state"],
                    KEY,
                    asked,
                    current_turn=turns,
                    history=history,
                    thread_id=walk_thread,
                )

            async def baseline(asked: int = asked) -> Any:
                return await _baseline_read(walk_agent, walk_thread, asked)

            # Every method must give the right answer before its time counts.
            ring_answer, walk_answer = await ring_read(), await walk_read()
            assert getattr(walk_answer, "value", None) == expected, walk_answer
            assert await baseline() == expected
            entry = ring_state["tool_state"][KEY]
            in_ring = getattr(ring_answer, "value", None) == expected
            if "baseline" not in results:
                # aget_state_history reads the whole thread before yielding, so the baseline
                # costs the same whichever turn is asked: measure it once per thread.
                results["baseline"] = await _timed(baseline, 3)
            results[label] = {
                "ring": await _timed(ring_read, repeat) if in_ring else None,
                "walk": await _timed(walk_read, repeat),
                "baseline": results["baseline"],
                "ring_holds_it": in_ring,
                "ring_versions": len(entry["ring"]),
            }
            _progress(f"{spec.split(':')[0]} {turns} turns: {label} measured")
        results["checkpoints"] = len(await history.checkpoint_ids(walk_thread))
    return results


def _lww(state: dict[str, Any]) -> dict[str, Any]:
    return {k: {"value": e["value"], "tool": e["tool"], "seq": e["seq"]} for k, e in state.items()}


def _bench_listing(repeat: int) -> dict[str, Any]:
    reducer = make_merge_tool_state()
    state: dict[str, Any] = {}
    for turn in range(1, 21):
        writes = {
            f"s/t/k{i}": {"value": {"i": i, "t": turn if i < 5 else 0}, "turn": turn, "tool": "t"}
            for i in range(40)
        }
        state = reducer(state, writes)
    versioned = {"tool_state": state}
    plain = {"tool_state": _lww(state)}
    out = {}
    for name, graph_state in (("versioned", versioned), ("last-write-wins", plain)):
        samples = []
        for _ in range(repeat * 20):
            start = time.perf_counter()
            read_state_key("*", graph_state)
            samples.append((time.perf_counter() - start) * 1000)
        out[name] = statistics.median(samples)
    out["ratio"] = out["versioned"] / out["last-write-wins"]
    return out


def _lww_reducer(current: dict[str, Any] | None, update: dict[str, Any]) -> dict[str, Any]:
    merged = dict(current or {})
    seq = max((e["seq"] for e in merged.values()), default=0)
    for key, write in update.items():
        seq += 1
        merged[key] = {"value": write["value"], "tool": write.get("tool"), "seq": seq}
    return merged


def _bench_reducer(repeat: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    versioned = make_merge_tool_state()
    for keys in (10, 100, 1000):
        row = {}
        for name, reducer in (("versioned", versioned), ("last-write-wins", _lww_reducer)):
            state: dict[str, Any] = {}
            for turn in (1, 2):
                state = reducer(
                    state, {f"k{i}": {"value": [i, turn], "turn": turn} for i in range(keys)}
                )
            samples = []
            for n in range(repeat * 10):
                write = {"k0": {"value": [n, 3], "turn": 3 + n, "tool": "t"}}
                start = time.perf_counter()
                reducer(state, write)
                samples.append((time.perf_counter() - start) * 1e6)
            row[name] = statistics.median(samples)
        row["ratio"] = row["versioned"] / row["last-write-wins"]
        out[str(keys)] = row
    return out


STORAGE_VARIANTS: dict[str, dict[str, Any]] = {
    "ring 0": {"ring_size": 0},
    "ring 4": {"ring_size": 4},
    "ring 8": {"ring_size": 8},
    "ring 16": {"ring_size": 16},
    "last-write-wins": {"reducer": None},  # filled in with _lww_reducer below
}


async def _stored_bytes(saver: Any, thread_id: str) -> int:
    """What the backend holds for one thread: checkpoints, metadata, blobs and writes."""
    if hasattr(saver, "storage"):  # in memory: the serialized bytes the saver keeps
        total = sum(len(c) + len(m) for c, m, _ in saver.storage[thread_id][""].values())
        total += sum(len(v[1]) for k, v in saver.blobs.items() if k[0] == thread_id)
        total += sum(
            len(w[2][1]) for k, ws in saver.writes.items() if k[0] == thread_id for w in ws.values()
        )
        return total
    if hasattr(saver, "_cursor"):  # PostgreSQL
        queries = [
            "SELECT COALESCE(SUM(pg_column_size(checkpoint) + pg_column_size(metadata)), 0) AS n "
            "FROM checkpoints WHERE thread_id = %s",
            "SELECT COALESCE(SUM(length(blob)), 0) AS n FROM checkpoint_blobs WHERE thread_id = %s",
            "SELECT COALESCE(SUM(length(blob)), 0) AS n FROM checkpoint_writes WHERE thread_id = %s",
        ]
        total = 0
        async with saver._cursor() as cursor:
            for query in queries:
                await cursor.execute(query, (thread_id,))
                total += int((await cursor.fetchone())["n"])
        return total
    total = 0  # SQLite
    for query in (
        "SELECT COALESCE(SUM(length(checkpoint) + length(metadata)), 0) FROM checkpoints WHERE thread_id = ?",
        "SELECT COALESCE(SUM(length(value)), 0) FROM writes WHERE thread_id = ?",
    ):
        async with saver.lock, saver.conn.execute(query, (thread_id,)) as cursor:
            total += (await cursor.fetchone())[0]
    return total


async def _bench_storage(spec: str, turns: int) -> dict[str, Any]:
    """Per variant: bytes stored for the thread, bytes per checkpoint, tool_state JSON size."""
    out: dict[str, Any] = {}
    async with open_checkpointer(spec) as saver:
        for name, options in STORAGE_VARIANTS.items():
            if "reducer" in options:
                options = {"reducer": _lww_reducer}
            agent = build_agent(
                ScriptedChatModel(respond=_respond), [measure], checkpointer=saver, **options
            )
            thread = f"store-{uuid4().hex}"
            for _ in range(turns):
                await run_turn(agent, thread, "measure")
            state = (await agent.aget_state({"configurable": {"thread_id": thread}})).values
            stored = await _stored_bytes(saver, thread)
            count = len(await CheckpointHistory(saver).checkpoint_ids(thread))
            out[name] = {
                "thread_bytes": stored,
                "per_checkpoint": stored / count,
                "tool_state_json": len(json.dumps(state["tool_state"])),
            }
    return out


COLORS = {"memory": "tab:blue", "sqlite": "tab:green", "postgres": "tab:red"}


def _spec(backend: str, workdir: Path) -> str:
    return {
        "memory": "memory",
        "sqlite": f"sqlite:{workdir / f'{uuid4().hex}.sqlite'}",
        "postgres": f"postgres:{PG_DSN}",
    }[backend]


def _plot(figures: dict[str, Any], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        _progress("matplotlib not installed (pip install -e '.[bench]'): no plot")
        return False
    fig, axes = plt.subplots(1, 2, figsize=(12, 5), sharey=True)
    for ax, label in zip(axes, ("turn 1", "turn T-3"), strict=True):
        for backend, by_length in figures["reads"].items():
            lengths = sorted(int(n) for n in by_length)
            for method, style in (("ring", "-"), ("walk", "--"), ("baseline", ":")):
                points = [
                    (n, by_length[str(n)][label][method]["median_ms"])
                    for n in lengths
                    if by_length[str(n)][label][method]
                ]
                if points:
                    ax.plot(
                        *zip(*points, strict=True),
                        style,
                        marker="o",
                        color=COLORS.get(backend),
                        label=f"{method} · {backend}",
                    )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("conversation length (turns)")
        ax.set_title(f"read of {label}")
        ax.grid(True, which="major", alpha=0.3)
    axes[0].set_ylabel("median latency (ms)")
    axes[1].legend(fontsize=7)
    fig.suptitle("inspect_state(key, turn=N): ring lookup vs library walk vs full history walk")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def _table(figures: dict[str, Any]) -> str:
    lines = [
        "## Turn reads (median ms, min–max)",
        "",
        "| backend | turns | read | ring | library walk | full history walk | walk ÷ ring | baseline ÷ walk |",
        "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |",
    ]

    def cell(m: dict[str, float] | None) -> str:
        return "—" if not m else f"{m['median_ms']:.2f} ({m['min_ms']:.2f}–{m['max_ms']:.2f})"

    for backend, by_length in figures["reads"].items():
        for length, reads in sorted(by_length.items(), key=lambda kv: int(kv[0])):
            for label in ("turn 1", "turn T-3"):
                r = reads[label]
                walk, base, ring = r["walk"]["median_ms"], r["baseline"]["median_ms"], r["ring"]
                lines.append(
                    f"| {backend} | {length} | {label} | {cell(ring)} | {cell(r['walk'])} | "
                    f"{cell(r['baseline'])} | {walk / ring['median_ms']:.1f}× | {base / walk:.0f}× |"
                    if ring
                    else f"| {backend} | {length} | {label} | — (beyond ring) | {cell(r['walk'])} | "
                    f"{cell(r['baseline'])} | — | {base / walk:.0f}× |"
                )
    lines += [
        "",
        "## Scaling: turn 1 read, median ms by length (growth exponent k in cost ∝ turns^k)",
        "",
    ]
    for backend, by_length in figures["reads"].items():
        lengths = sorted(int(n) for n in by_length)
        if len(lengths) < 2:
            continue
        lines += [
            f"| {backend} | " + " | ".join(f"{n} turns" for n in lengths) + " | k |",
            "| --- | " + " | ".join("---:" for _ in lengths) + " | ---: |",
        ]
        for method in ("walk", "baseline"):
            costs = [by_length[str(n)]["turn 1"][method]["median_ms"] for n in lengths]
            k = math.log(costs[-1] / costs[0]) / math.log(lengths[-1] / lengths[0])
            lines.append(f"| {method} | " + " | ".join(f"{c:.2f}" for c in costs) + f" | {k:.2f} |")
        lines.append("")
    listing = figures["listing"]
    lines += [
        "",
        '## Listing `inspect_state("*")`, 40 keys (median ms)',
        "",
        "| versioned | last-write-wins | ratio |",
        "| ---: | ---: | ---: |",
        f"| {listing['versioned']:.3f} | {listing['last-write-wins']:.3f} | {listing['ratio']:.2f} |",
    ]
    lines += [
        "",
        "## Reducer, one write (median µs)",
        "",
        "| keys | versioned | last-write-wins | ratio |",
        "| ---: | ---: | ---: | ---: |",
    ]
    for keys, row in figures["reducer"].items():
        lines.append(
            f"| {keys} | {row['versioned']:.1f} | {row['last-write-wins']:.1f} | {row['ratio']:.1f}× |"
        )
    lines += ["", f"## Storage ({figures['storage_turns']} turns, bytes)", ""]
    for backend, variants in figures["storage"].items():
        base = variants["last-write-wins"]["thread_bytes"]
        lines += [
            f"| {backend} | thread total | per checkpoint | vs last-write-wins | tool_state JSON |",
            "| --- | ---: | ---: | ---: | ---: |",
        ]
        for name, row in variants.items():
            lines.append(
                f"| {name} | {row['thread_bytes']:,} | {row['per_checkpoint']:,.0f} | "
                f"{row['thread_bytes'] / base:.3f}× | {row['tool_state_json']:,} |"
            )
        lines.append("")
    return "\n".join(lines)


async def _main(args: argparse.Namespace) -> None:
    lengths = [int(n) for n in args.turns.split(",")]
    repeat = 5 if args.quick else 15
    figures: dict[str, Any] = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "lengths": lengths,
        "reads": {},
    }
    workdir = RESULTS / "work"
    workdir.mkdir(parents=True, exist_ok=True)
    for backend in args.backends.split(","):
        figures["reads"][backend] = {}
        for turns in lengths:
            spec = _spec(backend, workdir)
            _progress(f"{backend}: building {turns}-turn threads")
            try:
                figures["reads"][backend][str(turns)] = await _bench_reads(spec, turns, repeat)
            except OSError as error:
                _progress(f"{backend} unavailable ({error}); skipped")
                break
    _progress("listing, reducer and storage")
    figures["listing"] = _bench_listing(repeat)
    figures["reducer"] = _bench_reducer(repeat)
    storage_turns = 20 if args.quick else 50
    figures["storage_turns"] = storage_turns
    figures["storage"] = {}
    for backend in figures["reads"]:
        _progress(f"{backend}: storage with ring sizes 0/4/8/16 and last-write-wins")
        figures["storage"][backend] = await _bench_storage(_spec(backend, workdir), storage_turns)
    for leftover in workdir.glob("*.sqlite*"):
        leftover.unlink()
    figures["command"] = f"python -m benchmarks {' '.join(sys.argv[1:])}".strip()
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "latest.json").write_text(json.dumps(figures, indent=1))
    _report(figures)


def _report(figures: dict[str, Any]) -> None:
    plotted = _plot(figures, RESULTS / "latest.png")
    print(
        f"Machine: {figures['machine']}. Command: {figures.get('command', 'python -m benchmarks')}\n"
    )
    print(_table(figures))
    print(
        f"\nRaw figures: {RESULTS / 'latest.json'}"
        + (f"; plot: {RESULTS / 'latest.png'}" if plotted else "")
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--quick", action="store_true", help="small threads: finishes in about a minute"
    )
    parser.add_argument(
        "--turns", default=None, help="comma-separated lengths (default 10,100,500)"
    )
    parser.add_argument("--backends", default="memory,sqlite,postgres")
    parser.add_argument(
        "--report",
        action="store_true",
        help="re-render the table and plot from the last run's JSON",
    )
    args = parser.parse_args(argv)
    if args.report:
        _report(json.loads((RESULTS / "latest.json").read_text()))
        return
    if args.turns is None:
        args.turns = "10,40" if args.quick else "10,100,500"
    asyncio.run(_main(args))


if __name__ == "__main__":
    main()
