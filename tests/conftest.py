"""Shared fixtures: the three checkpointer backends, and the PostgreSQL switch.

PostgreSQL tests connect to ``MCP_STATE_VERSIONS_PG_DSN`` (default: the local test server).
Where no server answers they skip, saying why, unless ``MCP_STATE_VERSIONS_REQUIRE_PG=1`` is set
(``.ci/run`` sets it): then a missing server is a failure, so CI always exercises PostgreSQL.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import Any
from uuid import uuid4

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.prebuilt import ToolRuntime

from mcp_state_versions.savers.memory import PruningInMemorySaver
from mcp_state_versions.savers.postgres import open_postgres_saver
from mcp_state_versions.savers.sqlite import PruningSqliteSaver

PG_DSN = os.environ.get("MCP_STATE_VERSIONS_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")
REQUIRE_PG = os.environ.get("MCP_STATE_VERSIONS_REQUIRE_PG", "") not in ("", "0", "false")

BACKENDS = ["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


def postgres_unavailable(error: Exception) -> None:
    """Skip, or fail when CI requires PostgreSQL, because no server answered."""
    reason = f"PostgreSQL not reachable at {PG_DSN} ({type(error).__name__}: {error})"
    if REQUIRE_PG:
        pytest.fail(f"{reason}; MCP_STATE_VERSIONS_REQUIRE_PG is set, so this is a failure")
    pytest.skip(f"{reason}; set MCP_STATE_VERSIONS_PG_DSN to run the PostgreSQL tests")


async def _check_postgres() -> None:
    import psycopg

    try:
        connection = await psycopg.AsyncConnection.connect(PG_DSN, connect_timeout=3)
    except Exception as error:
        postgres_unavailable(error)
    else:
        await connection.close()


async def open_backend(kind: str, tmp_path: Any, name: str = "t.sqlite") -> Any:
    """An async context manager opening a saver of ``kind`` (SQLite: file ``name``)."""
    from contextlib import asynccontextmanager

    @asynccontextmanager
    async def opened() -> AsyncIterator[Any]:
        if kind == "memory":
            yield PruningInMemorySaver()
        elif kind == "sqlite":
            async with PruningSqliteSaver.from_conn_string(str(tmp_path / name)) as saver:
                await saver.setup()
                yield saver
        else:
            await _check_postgres()
            async with open_postgres_saver(PG_DSN) as saver:
                yield saver

    return opened()


@pytest.fixture(params=BACKENDS)
async def saver(request: pytest.FixtureRequest, tmp_path: Any) -> AsyncIterator[Any]:
    async with await open_backend(request.param, tmp_path) as opened:
        yield opened


@pytest.fixture
def thread_id() -> str:
    return f"t-{uuid4().hex}"


def runtime_for(state: Any, thread_id: str | None = None) -> ToolRuntime:
    """A ToolRuntime as ToolNode would build it, for calling a tool directly."""
    config: RunnableConfig = {"configurable": {"thread_id": thread_id}} if thread_id else {}
    return ToolRuntime(
        state=state,
        context=None,
        config=config,
        stream_writer=lambda _: None,
        tool_call_id="call-1",
        store=None,
    )
