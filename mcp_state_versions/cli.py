"""The ``mcp-state-versions`` command line: the demo, and an operator's view of threads.

::

    mcp-state-versions demo [--checkpointer SPEC] [--model provider:name]
    mcp-state-versions inspect --checkpointer SPEC --thread T [KEY] [--turn N] [--versions] [--json]
    mcp-state-versions turns   --checkpointer SPEC --thread T [--json]
    mcp-state-versions prune   --checkpointer SPEC --thread T [--keep-turns N] [--drop-abandoned]
    mcp-state-versions serve   --checkpointer SPEC [--host 127.0.0.1] [--port 8000]

``SPEC`` is ``memory``, ``sqlite:PATH`` or ``postgres:DSN``. ``inspect`` answers exactly what
``inspect_state`` and the HTTP API answer (all three call the same resolution), and its exit
code says which answer it was, so scripts can branch on it:

====  ================================================================
0     found (or the command succeeded)
2     bad usage (unknown checkpointer spec, bad arguments)
3     the thread never had that turn (HTTP 404 ``turn_never_happened``)
4     the turn is no longer retained (HTTP 410 ``turn_not_retained``), or the current value
      was evicted for size (410 ``value_evicted``)
5     the key was not set yet at that turn (``key_not_set_yet``)
6     unknown thread or key
====  ================================================================
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from typing import Any

__all__ = ["EXIT_CODES", "main"]

EXIT_CODES = {
    "found": 0,
    "turn_never_happened": 3,
    "turn_not_retained": 4,
    "no_turn_history": 4,
    "value_evicted": 4,
    "key_not_set_yet": 5,
    "unknown_key": 6,
    "unknown_thread": 6,
}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mcp-state-versions", description="Versioned session state for LangGraph agents."
    )
    commands = parser.add_subparsers(dest="command", required=True)

    demo = commands.add_parser("demo", help="run the demo conversation through the agent loop")
    demo.add_argument("--checkpointer", metavar="SPEC", help="default: a new SQLite file")
    demo.add_argument(
        "--model",
        metavar="PROVIDER:NAME",
        help="a real chat model through LangChain's init_chat_model (default: scripted)",
    )

    def thread_command(name: str, text: str) -> argparse.ArgumentParser:
        command = commands.add_parser(name, help=text)
        command.add_argument("--checkpointer", metavar="SPEC", required=True)
        command.add_argument("--thread", required=True, help="the thread id")
        return command

    inspect = thread_command("inspect", "read a thread's state, now or as of a turn")
    inspect.add_argument("key", nargs="?", help="a key; omit to list every key")
    inspect.add_argument("--turn", type=int, help="the value at the end of this turn")
    inspect.add_argument("--versions", action="store_true", help="every version the key kept")
    inspect.add_argument("--json", action="store_true", help="print JSON instead of tables")

    turns = thread_command("turns", "how many turns a thread has had, and which are retained")
    turns.add_argument("--json", action="store_true")

    prune = thread_command("prune", "remove old turns and/or abandoned branches of a thread")
    prune.add_argument("--keep-turns", type=int, help="keep the last N turns")
    prune.add_argument("--drop-abandoned", action="store_true", help="delete forked-off branches")

    serve = commands.add_parser("serve", help="serve the HTTP API (extra 'api')")
    serve.add_argument("--checkpointer", metavar="SPEC", required=True)
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the process exit code."""
    args = _parser().parse_args(argv)
    try:
        if args.command == "demo":
            from .demo import main as demo_main

            demo_main(args.checkpointer, model=args.model)
            return 0
        if args.command == "serve":
            return _serve(args)
        return asyncio.run(_operate(args))
    except ValueError as error:  # CheckpointerSpecError, and refused arguments
        print(f"mcp-state-versions: {error}", file=sys.stderr)
        return 2


async def _operate(args: argparse.Namespace) -> int:
    from rich.console import Console

    from .checkpoint_walk import CheckpointHistory
    from .checkpointers import open_checkpointer

    console = Console()
    async with open_checkpointer(args.checkpointer) as saver:
        history = CheckpointHistory(saver)
        if args.command == "prune":
            return await _prune(console, saver, args)
        present = await history.present(args.thread)
        if present is None:
            return _report(console, args, "unknown_thread", f"no thread {args.thread!r} here", {})
        if args.command == "turns":
            index = await history.turns(args.thread)
            data = {
                "thread_id": args.thread,
                "total": index.total,
                "retained": list(index.retained),
            }
            if args.json:
                console.print_json(data=data)
            else:
                span = f"{index.retained[0]}–{index.retained[-1]}" if index.retained else "none"
                console.print(f"thread {args.thread}: {index.total} turns, retained: {span}")
            return 0
        return await _inspect(console, history, present, args)


def _report(console: Any, args: argparse.Namespace, code: str, message: str, data: dict) -> int:
    if getattr(args, "json", False):
        console.print_json(data={"outcome": code, "message": message, **data})
    else:
        console.print(f"[bold red]{code}[/]: {message}")
    return EXIT_CODES[code]


async def _inspect(console: Any, history: Any, present: Any, args: argparse.Namespace) -> int:
    from rich.table import Table

    from .history import Found, UnknownKey, outcome, resolve_turn
    from .inspect_tool import describe_answer, entry_summary, eviction_note, versioned_entries
    from .versions import version_spans

    entries = versioned_entries(present.tool_state)
    if args.key is None:
        rows = [{"key": k, **entry_summary(e)} for k, e in sorted(entries.items())]
        if args.json:
            console.print_json(data={"thread_id": args.thread, "turn": present.turn, "keys": rows})
            return 0
        table = Table(title=f"thread {args.thread} · turn {present.turn}")
        for column in ("key", "shape", "tool", "turn", "versions"):
            table.add_column(column)
        for row in rows:
            marker = f"{row['versions']} (rewritten)" if row["versions"] > 1 else "1"
            table.add_row(row["key"], row["shape"], str(row["tool"]), str(row["turn"]), marker)
        console.print(table)
        return 0
    if args.key not in entries:
        text = describe_answer(UnknownKey(args.key), keys=list(entries))
        return _report(console, args, "unknown_key", text, {"key": args.key})
    entry = entries[args.key]
    if args.versions:
        spans = version_spans(entry)
        items = [
            {"since": s.since, "until": s.until, "kept": s.kept, "value": s.value} for s in spans
        ]
        if args.json:
            data = {"key": args.key, "versions": entry["versions"], "items": items}
            console.print_json(data=data)
            return 0
        table = Table(title=f"{args.key} · {entry['versions']} versions")
        for column in ("turns", "value"):
            table.add_column(column)
        for item in items:
            turns = f"{item['since']}–{item['until'] if item['until'] is not None else 'now'}"
            table.add_row(turns, json.dumps(item["value"]) if item["kept"] else "(not kept)")
        console.print(table)
        return 0
    if args.turn is None and "value" not in entry:
        message = eviction_note(args.key, entry, flag="--turn ")
        return _report(console, args, "value_evicted", message, {"key": args.key})
    if args.turn is None:
        data = {
            "key": args.key,
            "value": entry.get("value"),
            "since": entry["since"],
            "versions": entry["versions"],
        }
        if args.json:
            console.print_json(data={"outcome": "found", **data})
        else:
            console.print_json(data=entry.get("value"))
        return 0
    if args.turn < 1:
        raise ValueError(f"--turn must be 1 or more, got {args.turn}")
    answer = await resolve_turn(
        entries,
        args.key,
        args.turn,
        current_turn=present.turn,
        history=history,
        thread_id=args.thread,
    )
    if isinstance(answer, Found):
        data = {
            "key": args.key,
            "turn": args.turn,
            "value": answer.value,
            "since": answer.since,
            "until": answer.until,
            "source": answer.source,
        }
        if args.json:
            console.print_json(data={"outcome": "found", **data})
        else:
            console.print_json(data=answer.value)
        return 0
    result = outcome(answer)
    extra = {"key": args.key, "turn": args.turn, **result.details}
    return _report(console, args, result.code, describe_answer(answer, keys=list(entries)), extra)


async def _prune(console: Any, saver: Any, args: argparse.Namespace) -> int:
    from .retention import prune_thread

    result = await prune_thread(
        saver, args.thread, keep_turns=args.keep_turns, drop_abandoned=args.drop_abandoned
    )
    span = (
        f"{result.retained_turns[0]}–{result.retained_turns[-1]}"
        if result.retained_turns
        else "none"
    )
    console.print(
        f"thread {args.thread}: removed {result.deleted} checkpoints; "
        f"{result.total_turns} turns, retained: {span}"
    )
    return 0


def _serve(args: argparse.Namespace) -> int:
    try:
        import uvicorn
    except ImportError:
        print(
            "mcp-state-versions serve needs the 'api' extra: pip install 'mcp-state-versions[api]'",
            file=sys.stderr,
        )
        return 2
    from .api import create_app
    from .checkpointers import open_checkpointer

    async def run() -> None:
        async with open_checkpointer(args.checkpointer) as saver:
            server = uvicorn.Server(
                uvicorn.Config(create_app(saver), host=args.host, port=args.port)
            )
            await server.serve()

    asyncio.run(run())
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
