"""The ``mcp-state-versions`` command line.

``mcp-state-versions demo [--checkpointer memory|sqlite:PATH|postgres:DSN]`` runs the demo
conversation (see :mod:`mcp_state_versions.demo`); without ``--checkpointer`` it uses a new
SQLite file, the embedded default.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mcp-state-versions",
        description="Versioned session state for LangGraph agents.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser(
        "demo", help="run the scripted demo conversation through the real agent loop"
    )
    demo.add_argument(
        "--checkpointer",
        metavar="SPEC",
        default=None,
        help="memory, sqlite:PATH or postgres:DSN (default: a new SQLite file)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the process exit code."""
    args = _parser().parse_args(argv)
    if args.command == "demo":
        from .checkpointers import CheckpointerSpecError
        from .demo import main as demo_main

        try:
            demo_main(args.checkpointer)
        except CheckpointerSpecError as error:
            print(f"mcp-state-versions: {error}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
