"""Opening a checkpointer from a short spec: ``memory``, ``sqlite:PATH`` or ``postgres:DSN``.

The demo and the command line take a checkpointer as text; this module turns that text into an
open saver and closes it afterwards. The savers are the library's retention-capable subclasses
(:mod:`mcp_state_versions.savers`), which behave exactly as the stock ones and add pruning.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # (imported where used: the command line's --help needs SPEC_HELP alone)
    from langgraph.checkpoint.base import BaseCheckpointSaver

__all__ = ["SPEC_HELP", "CheckpointerSpecError", "NotACheckpointDatabase", "open_checkpointer"]


class CheckpointerSpecError(ValueError):
    """A checkpointer spec that names no known backend, or one that cannot be opened.

    The message is one line saying what is wrong with the spec and what to do about it.
    """


class NotACheckpointDatabase(CheckpointerSpecError):
    """The spec names a file or database that exists but is not a LangGraph checkpoint
    database a reader can read (for PostgreSQL: its tables missing, or at an older migration
    than the installed LangGraph reads)."""


_SQLITE_HEADER = b"SQLite format 3\x00"
_LANGGRAPH_TABLES = {"checkpoints", "writes"}


SPEC_HELP = (
    "where threads are stored: 'memory' (this process only), 'sqlite:PATH' (a SQLite file), "
    "or 'postgres:DSN' / 'postgresql://...' (PostgreSQL; extra 'postgres')"
)

CONNECT_TIMEOUT_S = 3
"""How long opening a PostgreSQL checkpointer waits for the server before giving up."""


@asynccontextmanager
async def open_checkpointer(
    spec: str, *, create: bool = True, read_only: bool = False
) -> AsyncIterator[BaseCheckpointSaver]:
    """Open the checkpointer ``spec`` names, set up and ready, and close it on exit.

    * ``memory``: in this process only (gone when it exits);
    * ``sqlite:PATH``: an embedded SQLite file, created if missing unless ``create=False``
      (an operator's read of a thread should not create an empty database by mistake). With
      ``read_only=True`` it is opened read-only and must already be a LangGraph checkpoint
      database: a reader never changes the file it is pointed at (no tables, no index);
    * ``postgres:DSN``: a PostgreSQL database through a connection pool (extra ``postgres``);
      ``postgresql://...`` is accepted as is. The server is tried once with a
      ``CONNECT_TIMEOUT_S`` timeout first, so a wrong DSN fails fast, with the server's reason.
      With ``read_only=True`` nothing is set up, the server refuses any write on the pool's
      connections, and the database must already hold LangGraph's tables at the installed
      saver's migration: a role granted only ``SELECT`` can read.

    Raises :class:`CheckpointerSpecError` for a spec that names no backend or cannot be opened.
    """
    from .memory import PruningInMemorySaver
    from .sqlite import PruningSqliteSaver

    kind, _, target = spec.partition(":")
    if spec.startswith(("postgresql://", "postgres://")):
        kind, target = "postgres", spec
    if kind == "memory" and not target:
        yield PruningInMemorySaver()
    elif kind == "sqlite" and target and read_only and not _in_memory(target):
        async with _read_only_sqlite(target) as saver:
            yield saver
    elif kind == "sqlite" and target:
        _check_sqlite_path(target, create=create)
        async with PruningSqliteSaver.from_conn_string(target) as saver:
            await saver.setup()
            yield saver
    elif kind == "postgres" and target:
        from .postgres import open_postgres_saver

        await _check_postgres(target)
        async with open_postgres_saver(target, read_only=read_only) as saver:
            if read_only:
                await _check_postgres_tables(saver, target)
            yield saver
    else:
        raise CheckpointerSpecError(f"unknown checkpointer {spec!r}{_meant(spec)}; use {SPEC_HELP}")


def _meant(spec: str) -> str:
    """``"; did you mean sqlite:<spec>?"`` for a spec that is a file or a database address."""
    from pathlib import Path

    if spec and ":" not in spec and (Path(spec).is_file() or spec.endswith((".sqlite", ".db"))):
        return f" (did you mean sqlite:{spec}?)"
    if "@" in spec and "/" in spec and "://" not in spec:
        return f" (did you mean postgres:postgresql://{spec}?)"
    return ""


@asynccontextmanager
async def _read_only_sqlite(target: str) -> AsyncIterator[BaseCheckpointSaver]:
    import sqlite3

    import aiosqlite

    from .sqlite import PruningSqliteSaver

    _check_sqlite_path(target, create=False)
    path = Path(target).expanduser()
    with path.open("rb") as file:
        if file.read(len(_SQLITE_HEADER)) != _SQLITE_HEADER:
            raise NotACheckpointDatabase(f"{target!r} is not a SQLite database")
    async with aiosqlite.connect(_read_only_uri(path), uri=True) as conn:
        try:
            async with conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'") as rows:
                tables = {row[0] for row in await rows.fetchall()}
        except sqlite3.DatabaseError as error:
            raise NotACheckpointDatabase(f"{target!r} cannot be read as SQLite: {error}") from None
        if not tables >= _LANGGRAPH_TABLES:
            raise NotACheckpointDatabase(
                f"{target!r} is a SQLite database but not a LangGraph checkpoint database "
                "(it has no checkpoints and writes tables); give the file your agent's "
                "SqliteSaver writes to"
            )
        saver = PruningSqliteSaver(conn)
        saver.is_setup = True  # the tables are there; setting up would write to the file
        yield saver


def _read_only_uri(path: Path) -> str:
    """How SQLite opens ``path`` for reading only.

    A file in WAL mode is read beside its ``-shm`` index, which a reader creates when it is
    missing; on a read-only mount it cannot, and ``mode=ro`` fails. There the file cannot
    change either, so it is opened ``immutable`` (no locks, no index), which reads it exactly
    when every write is in the file itself. Writes still in a ``-wal`` file would be missed
    that way: that case is refused, saying what to do.
    """
    import os
    from urllib.parse import quote

    uri = f"file:{quote(str(path.resolve()))}"
    if os.access(path.parent, os.W_OK) or Path(f"{path}-shm").exists():
        return f"{uri}?mode=ro"
    wal = Path(f"{path}-wal")
    if wal.exists() and wal.stat().st_size > 0:
        raise NotACheckpointDatabase(
            f"{str(path)!r} is in a directory that cannot be written, and its latest writes "
            f"are still in {wal.name}, which SQLite reads only beside a -shm file it would "
            "have to create there; copy the file with its -wal file to a writable directory "
            "and open the copy"
        )
    return f"{uri}?immutable=1"


def _in_memory(target: str) -> bool:
    return target == ":memory:" or target.startswith("file:")


def _check_sqlite_path(target: str, *, create: bool) -> None:
    if _in_memory(target):
        return
    path = Path(target).expanduser()
    if path.is_dir():
        raise CheckpointerSpecError(
            f"sqlite:{target} is a directory; give the path of the SQLite file inside it"
        )
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
        message = f"cannot connect to PostgreSQL at {_redacted(dsn)}: {reason}"
        if isinstance(error, psycopg.OperationalError) and "FATAL:" not in reason:
            # no server answered (refused, unreachable, timed out): a store down, not a
            # wrong spec; a server that answered (FATAL: no such role, no such database)
            # says the spec is wrong
            from ..walk.history import StoreUnavailable

            raise StoreUnavailable(message) from None
        raise CheckpointerSpecError(message) from None
    await connection.close()


_POSTGRES_TABLES = ("checkpoints", "checkpoint_writes", "checkpoint_blobs", "checkpoint_migrations")
"""LangGraph's PostgreSQL tables, the first three holding the threads."""

_TABLES_THERE = (
    "SELECT name, to_regclass(name) IS NOT NULL AS there,"
    " coalesce(has_table_privilege(to_regclass(name), 'SELECT'), false) AS readable,"
    " current_user AS role FROM unnest(%s::text[]) AS tables(name)"
)
"""Which of LangGraph's tables are there (on the connection's search path, as the saver's own
statements name them) and readable by the connection's role, without failing on one that is
not."""


async def _check_postgres_tables(saver: BaseCheckpointSaver, dsn: str) -> None:
    """Refuse a database a reader cannot read, before reading: LangGraph's tables missing, or
    not readable by the role, or at an older migration than this LangGraph's saver reads (its
    queries name columns added since).

    A writer sets the tables up (``setup``); a reader opened with ``read_only=True`` does not,
    so it says what is missing in one line instead of failing in the middle of a read."""
    from ..walk.history import StoreUnavailable

    found = None
    async with saver.conn.connection() as connection:  # type: ignore[attr-defined]
        cursor = await connection.execute(_TABLES_THERE, (list(_POSTGRES_TABLES),))
        tables = {row["name"]: row for row in await cursor.fetchall()}
        missing = [name for name in _POSTGRES_TABLES[:3] if not tables[name]["there"]]
        unreadable = [name for name, row in tables.items() if row["there"] and not row["readable"]]
        if not missing and not unreadable and tables["checkpoint_migrations"]["there"]:
            cursor = await connection.execute("SELECT max(v) AS v FROM checkpoint_migrations")
            found = (await cursor.fetchone())["v"]
    where = _redacted(dsn)
    if missing:
        raise NotACheckpointDatabase(
            f"{where} has no LangGraph checkpoint tables ({', '.join(missing)}); give the "
            "database your agent's PostgresSaver writes to"
        )
    if unreadable:
        role = tables["checkpoints"]["role"]
        quoted = '"' + role.replace('"', '""') + '"'
        raise StoreUnavailable(
            f"{where}: role {role!r} may not read {', '.join(unreadable)}; a reader needs "
            f"GRANT SELECT ON {', '.join(_POSTGRES_TABLES)} TO {quoted}",
            refused=True,
        )
    needed = len(saver.MIGRATIONS) - 1  # type: ignore[attr-defined]
    if found is None or found < needed:
        at = "no recorded migration" if found is None else f"migration {found}"
        raise NotACheckpointDatabase(
            f"{where} holds LangGraph's tables at {at}, and the installed LangGraph reads "
            f"migration {needed}: let a writer set them up once (your agent's "
            "saver.setup()), then read"
        )


def _redacted(dsn: str) -> str:
    """The DSN without its password, for messages."""
    try:
        from psycopg.conninfo import conninfo_to_dict, make_conninfo

        parts = conninfo_to_dict(dsn)
    except Exception:
        return repr(dsn)
    if "password" in parts:
        parts["password"] = "***"
    return repr(make_conninfo("", **parts))
