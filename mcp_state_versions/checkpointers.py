"""Opening a checkpointer from a short spec: ``memory``, ``sqlite:PATH`` or ``postgres:DSN``.

The demo and the command line take a checkpointer as text; this module turns that text into an
open saver and closes it afterwards. The savers are the library's retention-capable subclasses
(:mod:`mcp_state_versions.retention`), which behave exactly as the stock ones and add pruning.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from langgraph.checkpoint.base import BaseCheckpointSaver

from .retention import PruningInMemorySaver, PruningSqliteSaver

__all__ = ["CheckpointerSpecError", "open_checkpointer"]


class CheckpointerSpecError(ValueError):
    """A checkpointer spec that names no known backend."""


@asynccontextmanager
async def open_checkpointer(spec: str) -> AsyncIterator[BaseCheckpointSaver]:
    """Open the checkpointer ``spec`` names, set up and ready, and close it on exit.

    * ``memory``: in this process only (gone when it exits);
    * ``sqlite:PATH``: an embedded SQLite file, created if missing;
    * ``postgres:DSN``: a PostgreSQL database through a connection pool (extra ``postgres``);
      ``postgresql://...`` is accepted as is.
    """
    kind, _, target = spec.partition(":")
    if spec.startswith(("postgresql://", "postgres://")):
        kind, target = "postgres", spec
    if kind == "memory" and not target:
        yield PruningInMemorySaver()
    elif kind == "sqlite" and target:
        async with PruningSqliteSaver.from_conn_string(target) as saver:
            await saver.setup()
            yield saver
    elif kind == "postgres" and target:
        from .retention import open_postgres_saver

        async with open_postgres_saver(target) as saver:
            yield saver
    else:
        raise CheckpointerSpecError(
            f"unknown checkpointer {spec!r}; use 'memory', 'sqlite:PATH' or 'postgres:DSN'"
        )
