"""The ``mcp-state-versions`` command line: the demo, and an operator's view of threads.

::

    mcp-state-versions demo    [--db PATH | --checkpointer SPEC] [--model provider:name] [--json]
    mcp-state-versions inspect --checkpointer SPEC --thread T [KEY [--turn N | --versions]]
                               [--checkpoint ID] [--json]
    mcp-state-versions turns   --checkpointer SPEC --thread T [--checkpoint ID] [--json]
    mcp-state-versions conversation --checkpointer SPEC --thread T (--turn N | --turns A-B)
                               [--checkpoint ID] [--json]
    mcp-state-versions diff    --checkpointer SPEC --thread T --key K --from N --to M [--json]
    mcp-state-versions prune   --checkpointer SPEC --thread T [--keep-turns N] [--drop-abandoned]
                               [--dry-run] [--yes] [--json]
    mcp-state-versions sweep   --checkpointer SPEC [--keep-turns N] [--idle-for 30d]
                               [--drop-abandoned] [--dry-run] [--yes] [--vacuum] [--json]
    mcp-state-versions threads --checkpointer SPEC [--contains TEXT] [--limit N] [--before CURSOR]
                               [--json]
    mcp-state-versions index   --checkpointer sqlite:PATH [--json]
    mcp-state-versions serve   --checkpointer SPEC [--host 127.0.0.1] [--port 8000] [--json]

``SPEC`` is ``memory``, ``sqlite:PATH`` or ``postgres:DSN``. Commands that only read
(``inspect``, ``turns``, ``conversation``, ``diff``, ``threads``, ``serve``, and dry runs)
open a SQLite file read-only and change nothing in it; on PostgreSQL they set nothing up, and
the server refuses their writes.
``inspect`` resolves a read exactly as ``inspect_state`` and the HTTP API do (all three call
:mod:`mcp_state_versions.walk.resolve`), and its exit code says which answer it was, so scripts can
branch on it (see :data:`EXIT_CODES`).

Standard output carries only what was asked for: a value, a listing, a report. Every other
outcome goes to standard error, one line addressed to the person at the terminal in terms of
the flags they typed (or, with ``--json``, one JSON object with its ``outcome`` code), with its
exit code. Ids and keys are printed literally, never interpreted as markup, and never wrapped
inside a key.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shlex
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
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
    "unknown_checkpoint": 6,
    "not_a_checkpoint_database": 7,
    "damaged_state": 8,
    "store_unavailable": 9,
    "cannot_listen": 10,
}

_EPILOG = """\
exit codes:
  0  found (or the command succeeded)
  2  bad usage: an unknown checkpointer (no such file, role or database), or flags that do not
     go together
  3  the thread never had that turn (HTTP 404 turn_never_happened)
  4  the turn is no longer retained, this deployment keeps no turn history, or the value was
     too large to keep (HTTP 410 turn_not_retained, no_turn_history, value_evicted)
  5  the key was not set yet at that turn (HTTP 404 key_not_set_yet)
  6  unknown thread, checkpoint or key (HTTP 404 unknown_thread, unknown_checkpoint,
     unknown_key)
  7  the file or database is not a LangGraph checkpoint database (PostgreSQL: no tables, or
     tables at an older migration than the installed LangGraph reads)
  8  the stored state is damaged where the read needed it (HTTP 500 damaged_state)
  9  the store did not answer (a PostgreSQL server down or unreachable), or cannot be written,
     or refused this role what the command needs (HTTP 503 store_unavailable)
 10  serve cannot listen on the host and port (in use, or not allowed)
"""


def _duration(text: str) -> float:
    from .retention.sweep import parse_duration

    try:
        return parse_duration(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"a port is a number from 1 to 65535, not {text!r}"
        ) from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(
            f"a port is a number from 1 to 65535 (0: any free one), not {port}"
        )
    return port


class UsageError(ValueError):
    """Flags that do not go together; the message says which to use."""


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("mcp-state-versions")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "unknown"


class _Version(argparse.Action):
    """``--version``, looked up only when asked for: reading the installed package's metadata
    costs every other command a hundredth of a second it does not need."""

    def __init__(self, option_strings: Sequence[str], dest: str, **_: Any) -> None:
        super().__init__(
            option_strings, dest=argparse.SUPPRESS, nargs=0, help="show the version and exit"
        )

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        print(f"{parser.prog} {_version()}")
        parser.exit()


class _Command(argparse.ArgumentParser):
    """A command's parser that adds its arguments when it is first used (to parse, or to print
    its help).

    A run uses one command. Adding an argument asks the terminal's size and the locale's
    translations, so adding every command's up front cost each run more than parsing its own
    (``benchmarks.cli``)."""

    def __init__(
        self, *args: Any, arguments: Callable[[_Command], None] | None = None, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self._arguments = arguments

    def _complete(self) -> None:
        arguments, self._arguments = self._arguments, None
        if arguments is not None:
            arguments(self)

    def parse_known_args(self, *args: Any, **kwargs: Any) -> Any:
        self._complete()
        return super().parse_known_args(*args, **kwargs)

    def format_help(self) -> str:
        self._complete()
        return super().format_help()

    def format_usage(self) -> str:
        self._complete()
        return super().format_usage()

    def error(self, message: str) -> Any:
        """Bad usage: with ``--json`` among the arguments, one JSON object on standard error
        (``"outcome": "usage"``), as every other outcome under ``--json``; exit 2 either way."""
        if "--json" in (_ARGV or ()):
            print(json.dumps({"outcome": "usage", "message": message}), file=sys.stderr)
            self.exit(2)
        return super().error(message)


_ARGV: Sequence[str] | None = None
"""The arguments being parsed (for :meth:`_Command.error`, which argparse gives none)."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mcp-state-versions",
        description="Versioned session state for LangGraph agents.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action=_Version)
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Command)
    for name, (text, arguments) in _COMMANDS.items():
        commands.add_parser(
            name,
            help=text,
            description=text,
            epilog=f"example:\n  mcp-state-versions {_EXAMPLES[name]}\n\n"
            "exit codes: mcp-state-versions --help lists them",
            formatter_class=argparse.RawDescriptionHelpFormatter,
            arguments=arguments,
        )
    return parser


_EXAMPLES = {
    "demo": "demo --db demo.sqlite",
    "inspect": "inspect --checkpointer sqlite:demo.sqlite --thread T gazet/get_aoi/bbox --turn 1",
    "turns": "turns --checkpointer sqlite:demo.sqlite --thread T",
    "conversation": "conversation --checkpointer sqlite:demo.sqlite --thread T --turns 3-4",
    "diff": "diff --checkpointer sqlite:demo.sqlite --thread T --key gazet/get_aoi/bbox "
    "--from 1 --to 3",
    "threads": "threads --checkpointer sqlite:demo.sqlite --contains demo --limit 10",
    "index": "index --checkpointer sqlite:demo.sqlite",
    "prune": "prune --checkpointer sqlite:demo.sqlite --thread T --keep-turns 5 --dry-run",
    "sweep": "sweep --checkpointer sqlite:demo.sqlite --idle-for 30d --keep-turns 20 --dry-run",
    "serve": "serve --checkpointer sqlite:demo.sqlite --port 8000",
}
"""Each command's example, shown in its help (the exit codes are listed once, in the main
help)."""


def _spec_help() -> str:
    from .savers.specs import SPEC_HELP

    return SPEC_HELP


def _checkpointer_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--checkpointer", metavar="SPEC", required=True, help=_spec_help())


def _json(parser: argparse.ArgumentParser, text: str = "print JSON") -> None:
    parser.add_argument("--json", action="store_true", help=text)


def _demo_arguments(demo: argparse.ArgumentParser) -> None:
    where = demo.add_mutually_exclusive_group()
    where.add_argument(
        "--db",
        metavar="PATH",
        help="the SQLite file to keep the demo's threads in "
        "(default: demo.sqlite in the current directory)",
    )
    where.add_argument("--checkpointer", metavar="SPEC", help=_spec_help())
    demo.add_argument(
        "--model",
        metavar="PROVIDER:NAME",
        help="a real chat model through LangChain's init_chat_model (default: scripted)",
    )
    _json(demo, "print each turn as a line of JSON")


def _thread_arguments(parsed: argparse.ArgumentParser) -> None:
    _checkpointer_argument(parsed)
    parsed.add_argument("--thread", required=True, help="the thread id")


def _reader_arguments(reader: argparse.ArgumentParser) -> None:
    reader.add_argument("--namespace", default="", help="a persistent subgraph's namespace")
    reader.add_argument(
        "--checkpoint",
        metavar="ID",
        help="read the branch that ends at this checkpoint (default: the newest)",
    )


def _inspect_arguments(inspect: argparse.ArgumentParser) -> None:
    _thread_arguments(inspect)
    inspect.add_argument("key", nargs="?", help="a key; omit to list every key")
    inspect.add_argument("--turn", type=int, help="the key's value at the end of this turn")
    inspect.add_argument("--versions", action="store_true", help="every version the key kept")
    _reader_arguments(inspect)
    _json(inspect, "print JSON instead of tables")


def _turns_arguments(turns: argparse.ArgumentParser) -> None:
    _thread_arguments(turns)
    _reader_arguments(turns)
    _json(turns)


def _turn_range(text: str) -> range:
    from .walk.conversation import TurnsError, parse_turns

    try:
        return parse_turns(text)
    except TurnsError as error:
        raise argparse.ArgumentTypeError(
            str(error).replace("turn=", "--turns ").replace("@conversation needs", "give")
        ) from None


def _positive_turn(text: str) -> int:
    try:
        turn = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"a turn is a whole number, 1 or more (turn 1 is the first), not {text!r}"
        ) from None
    if turn < 1:
        raise argparse.ArgumentTypeError(f"a turn is 1 or more (turn 1 is the first), not {turn}")
    return turn


def _conversation_arguments(conversation: argparse.ArgumentParser) -> None:
    _thread_arguments(conversation)
    which = conversation.add_mutually_exclusive_group(required=True)
    which.add_argument("--turn", type=_positive_turn, metavar="N", help="one turn")
    which.add_argument("--turns", type=_turn_range, metavar="A-B", help="up to five turns")
    _reader_arguments(conversation)
    _json(conversation)


def _diff_arguments(diff: argparse.ArgumentParser) -> None:
    _thread_arguments(diff)
    diff.add_argument("--key", required=True, help="the key whose values to compare")
    diff.add_argument("--from", dest="start", type=_positive_turn, required=True, metavar="N")
    diff.add_argument("--to", dest="end", type=_positive_turn, required=True, metavar="M")
    _reader_arguments(diff)
    _json(diff)


def _threads_arguments(threads: argparse.ArgumentParser) -> None:
    _checkpointer_argument(threads)
    threads.add_argument("--contains", metavar="TEXT", help="only threads whose id contains TEXT")
    threads.add_argument("--limit", type=int, default=50, help="threads per page (default 50)")
    threads.add_argument("--before", metavar="CURSOR", help="the page after this cursor")
    _json(threads)


def _index_arguments(index: argparse.ArgumentParser) -> None:
    index.add_argument("--checkpointer", metavar="SQLITE_SPEC", required=True, help="sqlite:PATH")
    _json(index)


def _prune_arguments(prune: argparse.ArgumentParser) -> None:
    _thread_arguments(prune)
    prune.add_argument("--keep-turns", type=int, metavar="N", help="keep the last N turns")
    prune.add_argument("--drop-abandoned", action="store_true", help="delete forked-off branches")
    prune.add_argument("--dry-run", action="store_true", help="say what would go; change nothing")
    prune.add_argument("--yes", action="store_true", help="do not ask before removing anything")
    _json(prune)


def _sweep_arguments(sweep: argparse.ArgumentParser) -> None:
    _checkpointer_argument(sweep)
    sweep.add_argument("--keep-turns", type=int, metavar="N", help="keep each thread's last turns")
    sweep.add_argument(
        "--idle-for",
        type=_duration,
        metavar="DURATION",
        help="delete threads not written to for this long (30d, 12h, 90m, 45s)",
    )
    sweep.add_argument("--drop-abandoned", action="store_true", help="delete forked-off branches")
    sweep.add_argument("--dry-run", action="store_true", help="say what would go; change nothing")
    sweep.add_argument("--yes", action="store_true", help="do not ask before removing anything")
    sweep.add_argument(
        "--vacuum", action="store_true", help="SQLite: VACUUM afterwards, reporting the bytes freed"
    )
    _json(sweep, "print the report as JSON")


def _serve_arguments(serve: argparse.ArgumentParser) -> None:
    _checkpointer_argument(serve)
    serve.add_argument("--host", default="127.0.0.1", help="default: 127.0.0.1")
    serve.add_argument(
        "--port",
        type=_port,
        default=8000,
        help="default: 8000; 0 takes any free port (--json says which)",
    )
    serve.add_argument(
        "--token",
        help="the bearer token every request must carry (default: $MCP_STATE_VERSIONS_API_TOKEN);"
        " on a shared machine prefer --token-file, which other users' process lists do not show",
    )
    serve.add_argument(
        "--token-file", metavar="PATH", help="read the token from this file (its first line)"
    )
    serve.add_argument(
        "--allow-open",
        action="store_true",
        help="serve a non-loopback --host without a token (anyone who can reach it reads every "
        "thread); refused otherwise",
    )
    _json(serve, "print where it listens as JSON, then serve")


_COMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None]]] = {
    "demo": ("run the demo conversation through the agent loop", _demo_arguments),
    "inspect": ("read a thread's state, now or as of a turn", _inspect_arguments),
    "turns": ("how many turns a thread has had, and which are retained", _turns_arguments),
    "conversation": (
        "what was said in a turn: its user message, calls and reply, read from history",
        _conversation_arguments,
    ),
    "diff": ("how a key's value changed between two turns", _diff_arguments),
    "threads": ("list a store's threads, newest first", _threads_arguments),
    "index": (
        "create the indexes that make reads of a SQLite file fast (writes them)",
        _index_arguments,
    ),
    "prune": ("remove old turns and/or abandoned branches of a thread", _prune_arguments),
    "sweep": (
        "apply a retention policy to every thread: delete idle ones, prune the others",
        _sweep_arguments,
    ),
    "serve": ("serve the HTTP API (extra 'api')", _serve_arguments),
}
"""Every command: its one-line help, and what adds its arguments (:class:`_Command`)."""


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the process exit code."""
    global _ARGV
    _ARGV = list(sys.argv[1:] if argv is None else argv)
    args = _parser().parse_args(_ARGV)
    as_json = bool(getattr(args, "json", False))
    # (here, not at the top: --help and --version load none of LangGraph)
    from .backends import unreachable
    from .savers.specs import NotACheckpointDatabase
    from .walk.history import DamagedState, StoreUnavailable

    try:
        _check_usage(args)
        if args.command == "demo":
            from .demo.run import main as demo_main

            demo_main(
                f"sqlite:{args.db}" if args.db else args.checkpointer,
                model=args.model,
                as_json=args.json,
            )
            return 0
        if args.command == "serve":
            return _serve(args)
        if args.command == "index":
            return asyncio.run(_index(args))
        if args.command == "sweep":
            return asyncio.run(_sweep(args))
        if args.command == "threads":
            return asyncio.run(_threads(args))
        return asyncio.run(_operate(args))
    except NotACheckpointDatabase as error:
        return _fail(error, "not_a_checkpoint_database", as_json=as_json)
    except ValueError as error:  # CheckpointerSpecError, UsageError, refused arguments
        return _fail(error, None, as_json=as_json)
    except DamagedState as error:
        return _fail(error, "damaged_state", as_json=as_json)
    except StoreUnavailable as error:
        return _fail(error, "store_unavailable", as_json=as_json)
    except BrokenPipeError:  # the reader went away (`| head`): nothing more to say to it
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as error:
        if unreachable(error):  # a write refused (a read-only file), a server gone
            reason = " ".join(str(error).split()) or type(error).__name__
            return _fail(
                f"cannot use {args.checkpointer}: {reason}", "store_unavailable", as_json=as_json
            )
        raise
    except KeyboardInterrupt:  # pragma: no cover - interactive
        return 130


def _fail(error: object, code: str | None, *, as_json: bool = False) -> int:
    """A failure (an error, bad usage) as :func:`_outcome` says it, on one line whatever the
    error's text; the exit code of ``code`` (``None``: bad usage, 2)."""
    return _outcome(code, " ".join(str(error).split()), as_json=as_json, named=False)


def _outcome(
    code: str | None,
    message: str,
    *,
    as_json: bool,
    data: dict[str, Any] | None = None,
    named: bool = True,
) -> int:
    """An outcome that is not a value, on standard error: one line (led by its ``code`` when
    ``named``), or one JSON object with ``--json``; its exit code says which it was. Standard
    output carries only values."""
    if as_json:
        body = {"outcome": code or "usage", "message": message, **(data or {})}
        print(json.dumps(body), file=sys.stderr)
    else:
        print(f"mcp-state-versions: {f'{code}: ' if named else ''}{message}", file=sys.stderr)
    return 2 if code is None else EXIT_CODES[code]


_CHECKPOINT_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
"""A checkpoint id, as LangGraph makes them: the head part of a listing's cursor."""


def _check_usage(args: argparse.Namespace) -> None:
    if args.command == "inspect":
        if args.key is None and (args.turn is not None or args.versions):
            raise UsageError("--turn and --versions read one key: give the KEY to read")
        if args.turn is not None and args.versions:
            raise UsageError("use either --turn N (one turn) or --versions (all of them)")
        if args.turn is not None and args.turn < 1:
            raise UsageError(f"--turn must be 1 or more (turn 1 is the first), got {args.turn}")
    if args.command == "threads" and args.before is not None:
        head = args.before.partition(" ")[0]
        if not _CHECKPOINT_ID.fullmatch(head):
            raise UsageError(
                f"--before takes the cursor a page ends with (its 'more: --before ...' line, "
                f"or 'next' under --json), not {args.before!r}"
            )
    if args.command == "sweep":
        if args.keep_turns is None and args.idle_for is None and not args.drop_abandoned:
            raise UsageError(
                "say what to sweep: --keep-turns N, --idle-for DURATION, --drop-abandoned"
            )
        if args.keep_turns is not None and args.keep_turns < 1:
            raise UsageError(f"--keep-turns must be at least 1, got {args.keep_turns}")
    if args.command == "prune":
        if args.keep_turns is None and not args.drop_abandoned:
            raise UsageError("say what to prune: --keep-turns N, --drop-abandoned, or both")
        if args.keep_turns is not None and args.keep_turns < 1:
            raise UsageError(
                f"--keep-turns must be at least 1 (the current turn), got {args.keep_turns}"
            )


def _console(*, stderr: bool = False) -> Any:
    from rich.console import Console

    return Console(highlight=False, stderr=stderr)


async def _operate(args: argparse.Namespace) -> int:
    from .savers.specs import open_checkpointer
    from .walk.checkpoints import CheckpointHistory
    from .walk.history import retained_span, turn_span

    writes = args.command == "prune" and not args.dry_run
    async with open_checkpointer(args.checkpointer, create=False, read_only=not writes) as saver:
        checkpoint = getattr(args, "checkpoint", None)
        history = CheckpointHistory(
            saver, namespace=getattr(args, "namespace", ""), checkpoint_id=checkpoint
        )
        present = await history.present(args.thread, damage_ok=True)
        if present is None and checkpoint is not None:
            message = f"thread {args.thread!r} has no checkpoint {checkpoint!r}"
            return _report(args, "unknown_checkpoint", message, {})
        if present is None and args.command != "prune" and args.namespace:
            root = await CheckpointHistory(saver).present(args.thread, damage_ok=True)
            if root is not None:
                message = (
                    f"thread {args.thread!r} has no namespace {args.namespace!r} (a persistent "
                    "subgraph's); omit --namespace to read the thread itself"
                )
                return _report(args, "unknown_thread", message, {"namespace": args.namespace})
        if present is None:
            return _report(args, "unknown_thread", f"no thread {args.thread!r} here", {})
        if args.command == "prune":
            return await _prune(_console(), saver, args)
        if args.command == "turns":
            # One line or one small object: printed without Rich, whose import would be most
            # of what a read costs beyond the saver's own (benchmarks.cli).
            index = await history.turns(args.thread)
            data = {
                "outcome": "found",
                "thread_id": args.thread,
                "total": index.total,
                "retained": retained_span(index.retained),
            }
            if args.json:
                print(json.dumps(data, indent=2, ensure_ascii=False))
            else:
                span = turn_span(index.retained)
                print(f"thread {args.thread}: {index.total} turns, retained: {span}")
            return 0
        if args.command == "conversation":
            return await _conversation(history, args)
        if args.command == "diff":
            return await _diff(history, present, args)
        return await _inspect(_console(), history, present, args)


async def _conversation(history: Any, args: argparse.Namespace) -> int:
    """``conversation``: each turn asked for, as the page's turn panel shows it."""
    from .walk.conversation import conversation_value, turn_conversation
    from .walk.history import retained_span, turn_span

    turns = args.turns if args.turns is not None else range(args.turn, args.turn + 1)
    found = []
    for turn in turns:
        read = await history.turn_messages(args.thread, turn)
        index = read.index
        if turn > index.total:
            message = f"turn {turn} never happened: the thread has had {index.total}"
            return _report(args, "turn_never_happened", message, {"total": index.total})
        if read.messages is None:
            message = f"turn {turn} is no longer retained (retained: {turn_span(index.retained)})"
            retained = retained_span(index.retained)
            return _report(args, "turn_not_retained", message, {"retained": retained})
        said = turn_conversation(read.messages, read.record)
        found.append(conversation_value(said, turn, cut=False))
    if args.json:
        body = {"outcome": "found", "thread_id": args.thread, "turns": found}
        print(json.dumps(body, indent=2, ensure_ascii=False))
        return 0
    for number, turn_found in enumerate(found):
        if number:
            print()
        print(_conversation_text(turn_found))
    return 0


def _conversation_text(found: dict[str, Any]) -> str:
    lines = [f"turn {found['turn']}" + (" (still open)" if found.get("open") else "")]
    lines.append(f"  user:  {found['user'] if found['user'] is not None else '(no longer held)'}")
    for call in found["calls"]:
        arguments = json.dumps(call["args"], ensure_ascii=False)
        lines.append(f"  call:  {call['tool']} {arguments}")
        if call["result"] is not None:
            lines.append("         -> " + call["result"].replace("\n", "\n            "))
    if found.get("open"):
        lines.append("  reply: (still to come: a call waits for a person)")
    else:
        lines.append(f"  reply: {found['reply'] if found['reply'] is not None else '(no reply)'}")
    return "\n".join(lines)


async def _diff(history: Any, present: Any, args: argparse.Namespace) -> int:
    """``diff``: the key's value at the end of ``--from`` and of ``--to``, as a unified diff
    of their JSON (when they are equal, nothing on standard output and a word on standard
    error; exit 0 either way)."""
    import difflib

    from .walk.history import Found
    from .walk.resolve import resolve_turn

    values = []
    for turn in (args.start, args.end):
        answer = await resolve_turn(
            present.tool_state,
            args.key,
            turn,
            current_turn=present.turn,
            history=history,
            thread_id=args.thread,
        )
        if not isinstance(answer, Found):
            args.turn = turn  # the turn the outcome is about
            return _answer(_console(), args, answer, list(present.tool_state))
        values.append(answer.value)
    texts = [json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True) for value in values]
    if args.json:
        body = {
            "outcome": "found",
            "thread_id": args.thread,
            "key": args.key,
            "from": {"turn": args.start, "value": values[0]},
            "to": {"turn": args.end, "value": values[1]},
            "equal": values[0] == values[1],
        }
        print(json.dumps(body, indent=2, ensure_ascii=False))
        return 0
    lines = difflib.unified_diff(
        texts[0].splitlines(),
        texts[1].splitlines(),
        f"{args.key} at the end of turn {args.start}",
        f"{args.key} at the end of turn {args.end}",
        lineterm="",
    )
    diff = "\n".join(lines)
    if diff:
        print(diff)
    else:
        print("mcp-state-versions: the values are equal", file=sys.stderr)
    return 0


def _report(args: argparse.Namespace, code: str, message: str, data: dict[str, Any]) -> int:
    """A read's outcome that is not a value (see :func:`_outcome`), with its details."""
    return _outcome(code, message, as_json=getattr(args, "json", False), data=data)


async def _inspect(console: Any, history: Any, present: Any, args: argparse.Namespace) -> int:
    from .walk.history import UnknownKey
    from .walk.resolve import resolve_past, resolve_turn, versioned_entries
    from .wording.answers import entry_summary, eviction_status, status_line

    if present.damage is not None:
        if args.key is None or args.turn is None:
            raise present.damage
        # The newest checkpoint cannot be read; an earlier turn may still be.
        past = await resolve_past(args.key, args.turn, history=history, thread_id=args.thread)
        return _answer(console, args, past, [])
    entries = versioned_entries(present.tool_state)
    if args.key is None:
        rows = [{"key": k, **entry_summary(e)} for k, e in sorted(entries.items())]
        if args.json:
            listing = {"thread_id": args.thread, "turn": present.turn, "keys": rows}
            console.print_json(data={"outcome": "found", **listing})
            return 0
        table = _table(("key", "shape", "tool", "turn", "versions"), keys=[r["key"] for r in rows])
        for row in rows:
            marker = f"{row['versions']} (rewritten)" if row["versions"] > 1 else "1"
            cells = (row["key"], row["shape"], str(row["tool"]), str(row["turn"]), marker)
            table.add_row(*map(_text, cells))
        _title(console, f"thread {args.thread} · turn {present.turn} · {len(rows)} keys")
        console.print(table)
        return 0
    if args.key not in entries:
        text = status_line(UnknownKey(args.key), keys=list(entries))
        return _report(args, "unknown_key", text, {"key": args.key})
    entry = entries[args.key]
    if args.versions:
        return await _versions(console, history, present, args, entry)
    if args.turn is None and "value" not in entry:
        message = eviction_status(args.key, entry, flag="--turn ")
        return _report(args, "value_evicted", message, {"key": args.key})
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
    answer = await resolve_turn(
        entries,
        args.key,
        args.turn,
        current_turn=present.turn,
        history=history,
        thread_id=args.thread,
    )
    return _answer(console, args, answer, list(entries))


async def _versions(
    console: Any, history: Any, present: Any, args: argparse.Namespace, entry: Any
) -> int:
    """Every version of a key, from its ring and, beyond it, from history (one read each)."""
    from .walk.resolve import resolve_versions
    from .wording.answers import counted, version_span

    rows = await resolve_versions(
        entry, args.key, current_turn=present.turn, history=history, thread_id=args.thread
    )
    items = [row.as_dict() for row in rows]
    if args.json:
        data = {
            "outcome": "found",
            "key": args.key,
            "versions": entry["versions"],
            "value": entry.get("value"),
            "items": items,
        }
        console.print_json(data=data)
        return 0
    table = _table(("turns", "status", "value"))
    for row in rows:
        if row.since is None:
            turns = (
                f"before {row.until + 1} ({counted(row.count, 'version')})"
                if row.until
                else "earlier"
            )
        else:
            turns = version_span(row.since, row.until)
        value = json.dumps(row.value, ensure_ascii=False) if row.status == "kept" else ""
        table.add_row(turns, row.status, _text(value))
    _title(console, f"{args.key} · {counted(entry['versions'], 'version')} · thread {args.thread}")
    console.print(table)
    return 0


def _text(cell: str) -> Any:
    from rich.text import Text

    return Text(cell)  # printed literally: ids, keys and values are never markup


def _table(columns: Sequence[str], *, keys: Sequence[str] = ()) -> Any:
    """A table whose first column, when it holds keys, is never wrapped inside a key."""
    from rich.table import Table

    table = Table()
    for index, column in enumerate(columns):
        if index == 0 and keys:
            width = max(len(column), *(len(key) for key in keys))
            table.add_column(column, no_wrap=True, min_width=width)
        else:
            table.add_column(column, overflow="fold")
    return table


def _title(console: Any, title: str) -> None:
    """A table's title on a line of its own, never wrapped (a key in it stays whole)."""
    console.print(title, markup=False, soft_wrap=True, style="bold")


def _answer(console: Any, args: argparse.Namespace, answer: Any, keys: list[str]) -> int:
    """Print a turn read's answer (the value, or the outcome on one line) and exit with it."""
    from .walk.history import Found, outcome
    from .wording.answers import status_line

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
    return _report(args, result.code, status_line(answer, keys=keys), extra)


async def _prune(console: Any, saver: Any, args: argparse.Namespace) -> int:
    from .retention.prune import prune_thread
    from .walk.history import retained_span

    policy = {"keep_turns": args.keep_turns, "drop_abandoned": args.drop_abandoned}
    result = await prune_thread(saver, args.thread, **policy, dry_run=True)
    if not args.dry_run and result.deleted:
        if not _confirmed(args, "a prune removes turns", _pruned_text(args, result)):
            return 0
        result = await prune_thread(saver, args.thread, **policy)
    if args.json:
        console.print_json(
            data={
                "outcome": "found",
                "thread_id": args.thread,
                "dry_run": result.dry_run,
                "checkpoints_removed": result.deleted,
                "bytes_removed": result.bytes_removed,
                "total": result.total_turns,
                "retained": retained_span(result.retained_turns),
            }
        )
        return 0
    console.print(_pruned_text(args, result), markup=False, soft_wrap=True)
    return 0


def _pruned_text(args: argparse.Namespace, result: Any) -> str:
    from .walk.history import turn_span

    verb = "would remove" if result.dry_run else "removed"
    retained = result.retained_turns
    kept = (
        "none retained"
        if not retained
        else f"turn {retained.start} retained"
        if len(retained) == 1
        else f"turns {turn_span(retained)} retained"
    )
    return (
        f"thread {args.thread}: {verb} {result.deleted} checkpoints "
        f"({_bytes(result.bytes_removed)}); of its {result.total_turns} turns, {kept}"
    )


def _confirmed(args: argparse.Namespace, what: str, plan: str) -> bool:
    """Whether to go ahead with a removal: ``--yes``, or a person at a terminal who said so
    after reading ``plan``; anywhere else, without ``--yes``, it is refused (bad usage)."""
    if args.yes:
        return True
    if not sys.stdin.isatty():
        raise UsageError(f"{what}: pass --yes to go ahead, or --dry-run to see what would go")
    errors = _console(stderr=True)
    errors.print(plan, markup=False, soft_wrap=True)
    if input("Go ahead? [y/N] ").strip().lower() in ("y", "yes"):
        return True
    errors.print("nothing removed", markup=False)
    return False


async def _threads(args: argparse.Namespace) -> int:

    from .savers.specs import open_checkpointer
    from .walk.threads import list_threads

    if args.limit < 1:
        raise UsageError(f"--limit must be at least 1, got {args.limit}")
    console = _console()
    async with open_checkpointer(args.checkpointer, create=False, read_only=True) as saver:
        page = await list_threads(
            saver, limit=args.limit, before=args.before, contains=args.contains
        )
    rows = [
        {
            "thread_id": t.thread_id,
            "turns": t.turns,
            "last_write": t.last_write.isoformat(timespec="seconds") if t.last_write else None,
            "stored_bytes": t.stored_bytes,
            **({"damage": t.damage} if t.damage else {}),
        }
        for t in page.threads
    ]
    if args.json:
        console.print_json(data={"outcome": "found", "threads": rows, "next": page.next})
        return 0
    if not rows:
        which = f" whose id contains {args.contains!r}" if args.contains else ""
        print(f"mcp-state-versions: no threads{which} here", file=sys.stderr)
        return 0
    table = _table(
        ("thread", "turns", "last write", "stored"), keys=[t.thread_id for t in page.threads]
    )
    for t in page.threads:
        table.add_row(
            _text(t.thread_id),
            "damaged" if t.turns is None else str(t.turns),
            t.last_write.isoformat(timespec="seconds") if t.last_write else "",
            _bytes(t.stored_bytes),
        )
    console.print(table)
    if page.next:
        print(f"more: --before {shlex.quote(page.next)}", file=sys.stderr)
    return 0


def _bytes(count: int) -> str:
    for unit, size in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if count >= size:
            return f"{count / size:.1f} {unit}"
    return f"{count} bytes"


async def _sweep(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from .retention.sweep import reclaim, sweep
    from .savers.specs import open_checkpointer

    console = _console()
    errors = _console(stderr=True)
    policy = {
        "keep_turns": args.keep_turns,
        "idle_for": args.idle_for,
        "drop_abandoned": args.drop_abandoned,
    }
    async with open_checkpointer(args.checkpointer, create=False, read_only=args.dry_run) as saver:
        planned = await sweep(saver, **policy, dry_run=True)
        if args.dry_run:
            return _swept(console, args, planned, None)
        if planned.checkpoints_removed == 0:  # nothing to remove: the sweep is done
            return _swept(console, args, replace(planned, dry_run=False), None)
        if not _confirmed(args, "a sweep removes threads and turns", _summary(args, planned)):
            return 0
        report = await _with_progress(errors, saver, policy, planned.threads_seen)
        freed = await reclaim(saver) if args.vacuum else None
    return _swept(console, args, report, freed)


async def _with_progress(errors: Any, saver: Any, policy: dict[str, Any], total: int) -> Any:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from .retention.sweep import sweep

    columns = (
        TextColumn("sweeping"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[last]}"),
    )
    with Progress(*columns, console=errors, transient=True) as bar:
        task = bar.add_task("sweep", total=total or None, last="")

        def advance(step: Any) -> None:
            bar.update(task, completed=step.report.threads_seen, last=step.thread_id)

        return await sweep(saver, **policy, progress=advance)


def _summary(args: argparse.Namespace, report: Any, freed: int | None = None) -> str:
    verb = (
        ("would delete", "would prune", "would remove")
        if report.dry_run
        else ("deleted", "pruned", "removed")
    )
    text = (
        f"{args.checkpointer}: {report.threads_seen} threads; {verb[0]} "
        f"{report.threads_deleted} idle, {verb[1]} {report.threads_pruned}; {verb[2]} "
        f"{report.checkpoints_removed} checkpoints ({_bytes(report.bytes_removed)})"
    )
    if freed is not None:
        text += f"; VACUUM freed {_bytes(freed)}"
    return text


def _swept(console: Any, args: argparse.Namespace, report: Any, freed: int | None) -> int:
    if args.json:
        data = {
            "dry_run": report.dry_run,
            "threads_seen": report.threads_seen,
            "threads_deleted": report.threads_deleted,
            "threads_pruned": report.threads_pruned,
            "checkpoints_removed": report.checkpoints_removed,
            "bytes_removed": report.bytes_removed,
            "bytes_reclaimed": freed,
            "seconds": round(report.seconds, 3),
        }
        console.print_json(data=data)
    else:
        console.print(_summary(args, report, freed), markup=False, soft_wrap=True)
    return 0


async def _index(args: argparse.Namespace) -> int:
    from .backends.sqlite import INDEX_NAME, WHOLE_INDEX_NAME, sqlite_backend
    from .savers.specs import open_checkpointer

    if not args.checkpointer.startswith("sqlite:"):
        raise UsageError("index is for SQLite files: --checkpointer sqlite:PATH")
    async with open_checkpointer(args.checkpointer, create=False, read_only=True):
        pass  # refuse a file that is not a checkpoint database before writing to it
    async with open_checkpointer(args.checkpointer, create=False) as saver:
        backend = sqlite_backend(saver, sync=False)
        assert backend is not None
        await backend.create_index()  # type: ignore[attr-defined]
    if args.json:
        found = {"index": INDEX_NAME, "indexes": [INDEX_NAME, WHOLE_INDEX_NAME]}
        print(json.dumps({"checkpointer": args.checkpointer, **found}))
    else:
        print(f"{args.checkpointer}: indexes {INDEX_NAME} and {WHOLE_INDEX_NAME} are in place")
    return 0


def _serve_token(args: argparse.Namespace) -> str | None:
    """The token ``serve`` asks for: ``--token``, else ``--token-file``'s first line, else
    the environment's; ``None`` for none."""
    if args.token is not None and args.token_file is not None:
        raise UsageError("give the token once: --token or --token-file")
    if args.token_file is not None:
        try:
            lines = Path(args.token_file).read_text(encoding="utf-8").splitlines()
        except OSError as error:
            raise UsageError(
                f"cannot read --token-file {args.token_file}: {error.strerror}"
            ) from None
        token = lines[0].strip() if lines else ""
        if not token:
            raise UsageError(f"--token-file {args.token_file} is empty")
        return token
    if args.token is not None:
        if not args.token.strip():
            raise UsageError("--token is empty")
        return args.token
    from .api import TOKEN_ENV

    return os.environ.get(TOKEN_ENV) or None


def _loopback(host: str) -> bool:
    """Whether ``host`` is reachable from this machine only."""
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name: it may resolve to anything


def _serve(args: argparse.Namespace) -> int:
    try:
        import uvicorn

        from .api import create_app
    except ImportError:
        print(
            "mcp-state-versions: serve needs the 'api' extra: "
            "pip install 'mcp-state-versions[api]'",
            file=sys.stderr,
        )
        return 2
    import socket

    from .savers.specs import open_checkpointer

    token = _serve_token(args)
    if token is None and not args.allow_open and not _loopback(args.host):
        raise UsageError(
            f"--host {args.host} can be reached from other machines, and without a token "
            "anyone who reaches it reads every thread: give --token-file PATH (or --token, or "
            "$MCP_STATE_VERSIONS_API_TOKEN), or --allow-open to serve it open anyway"
        )

    try:  # uvicorn reports a busy port in its log and exits 3; say it in one line instead
        listening = socket.create_server((args.host, args.port))
    except OSError as error:
        return _fail(
            f"cannot listen on {args.host}:{args.port}: {error.strerror or error}; "
            "choose another --port or stop what is using it",
            "cannot_listen",
        )

    from .retention.sweep import SweepSchedule

    schedule = SweepSchedule.from_env()  # a sweeper writes; without one, serve only reads
    if schedule is not None:  # what each sweep removed goes to the log, beside uvicorn's
        import logging

        log = logging.getLogger("mcp_state_versions")
        if not log.handlers:
            handler = logging.StreamHandler()
            handler.setFormatter(logging.Formatter("%(levelname)s:     %(message)s"))
            log.addHandler(handler)
            log.setLevel(logging.INFO)

    async def run() -> None:
        async with open_checkpointer(
            args.checkpointer, create=False, read_only=schedule is None
        ) as saver:
            app = create_app(saver, token=token, sweep=schedule)
            port = listening.getsockname()[1]  # the one chosen, for --port 0
            server = uvicorn.Server(uvicorn.Config(app, host=args.host, port=port))
            if args.json:  # the socket listens already: a client may connect at once
                where = {"url": f"http://{args.host}:{port}", "sweep": schedule is not None}
                print(json.dumps(where), flush=True)
            await server.serve(sockets=[listening])

    with listening:
        asyncio.run(run())
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
