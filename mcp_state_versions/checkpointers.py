"""Opening a checkpointer from a short spec: ``memory``, ``sqlite:PATH`` or ``postgres:DSN``.

The demo and the command line take a checkpointer as text; this module turns that text into an
open saver and closes it afterwards. The savers are the library's retention-capable subclasses
(:mod:`mcp_state_versions.retention`), which behave exactly as the stock ones and add pruning.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from langgraph.checkpoint.base import BaseCheckpointSaver

from .retention import PruningInMemorySaver, PruningSqliteSaver

__all__ = ["SPEC_HELP", "CheckpointerSpecError", "open_checkpointer"]


class CheckpointerSpecError(ValueError):
    """A checkpointer spec that names no known backend, or one that cannot be opened.

    The message is one line saying what is wrong with the spec and what to do about it.
    """


SPEC_HELP = (
    "where threads are stored: 'memory' (this process only), 'sqlite:PATH' (a SQLite file), "
    "or 'postgres:DSN' / 'postgresql://...' (PostgreSQL; extra 'postgres')"
)

CONNECT_TIMEOUT_S = 3
"""How long opening a PostgreSQL checkpointer waits for the server before giving up."""


@asynccontextmanager
async def open_checkpointer(
    spec: str, *, create: bool = True
) -> AsyncIterator[BaseCheckpointSaver]:
    """Open the checkpointer ``spec`` names, set up and ready, and close it on exit.

    * ``memory``: in this process only (gone when it exits);
    * ``sqlite:PATH``: an embedded SQLite file, created if missing unless ``create=False``
      (an operator's read of a thread should not create an empty database by mistake);
    * ``postgres:DSN``: a PostgreSQL database through a connection pool (extra ``postgres``);
      ``postgresql://...`` is accepted as is. The server is tried once with a
      ``CONNECT_TIMEOUT_S`` timeout first, so a wrong DSN fails fast, with the server's reason.

    Raises :class:`CheckpointerSpecError` for a spec that names no backend or cannot be opened.
    """
    kind, _, target = spec.partition(":")
    if spec.startswith(("postgresql://", "postgres://")):
        kind, target = "postgres", spec
    if kind == "memory" and not target:
        yield PruningInMemorySaver()
    elif kind == "sqlite" and target:
        _check_sqlite_path(target, create=create)
        async with PruningSqliteSaver.from_conn_string(target) as saver:
            await saver.setup()
            yield saver
    elif kind == "postgres" and target:
        from .retention import open_postgres_saver

        await _check_postgres(target)
        async with open_postgres_saver(target) as saver:
            yield saver
    else:
        raise CheckpointerSpecError(f"unknown checkpointer {spec!r}; use {SPEC_HELP}")


def _check_sqlite_path(target: str, *, create: bool) -> None:
    if target == ":memory:" or target.startswith("file:"):
        return
    path = Path(target).expanduser()
    if not path.parent.is_dir():
        raise CheckpointerSpecError(
            f"cannot open sqlite:{target}: the directory {str(path.parent)!r} does not exist"
        )
    if not create and not path.exists():
        raise CheckpointerSpecError(
            f"no SQLite file at {target!r}; give the path the demo or your agent writes to "
            "(the demo prints it)"
        )


async def _check_postgres(dsn: str) -> None:
    try:
        import psycopg
    except ImportError:
        raise CheckpointerSpecError(
            "a PostgreSQL checkpointer needs the 'postgres' extra: "
            "pip install 'mcp-state-versions[postgres]'"
        ) from None
    try:
        connection = await psycopg.AsyncConnection.connect(dsn, connect_timeout=CONNECT_TIMEOUT_S)
    except (psycopg.Error, ValueError) as error:
        reason = " ".join(str(error).split()) or type(error).__name__
        raise CheckpointerSpecError(
            f"cannot connect to PostgreSQL at {_redacted(dsn)}: {reason}"
        ) from None
    await connection.close()


def _redacted(dsn: str) -> str:
    """The DSN without its password, for messages."""
    try:
        from psycopg.conninfo import conninfo_to_dict, make_conninfo

        parts = conninfo_to_dict(dsn)
    except Exception:
        return repr(dsn)
    if "password" in parts:
        parts["password"] = "***"
    return repr(make_conninfo(**parts))
