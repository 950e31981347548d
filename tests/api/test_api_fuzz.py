"""Fuzz the HTTP API against its own OpenAPI schema: no input may produce a server error.

Once over an in-memory saver, once over PostgreSQL (whose text columns refuse NUL bytes and
invalid UTF-8, which is where a careless route turns a bad id into a 500).
"""

from __future__ import annotations

import asyncio
import atexit
from typing import Any
from uuid import uuid4

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error

from mcp_state_versions.agent.build import run_turn
from mcp_state_versions.api import create_app
from mcp_state_versions.savers.memory import PruningInMemorySaver

from ..conftest import PG_DSN, postgres_unavailable
from ..helpers import agent_on

THREAD = "t"


def _populated_saver() -> PruningInMemorySaver:
    saver = PruningInMemorySaver()

    async def fill() -> None:
        agent = agent_on(saver, ring_size=1)
        for text in ["find Copenhagen", "chat", "find Aarhus", "find Oslo"]:
            await run_turn(agent, THREAD, text)

    asyncio.run(fill())
    return saver


schema = schemathesis.openapi.from_asgi("/openapi.json", create_app(_populated_saver()))


def _aim_at_real_threads(case: schemathesis.Case, thread: str) -> None:
    if "thread_id" in (case.path_parameters or {}) and case.path_parameters["thread_id"][:1] == "x":
        case.path_parameters["thread_id"] = thread  # also exercise a thread that exists


@schema.parametrize()
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_server_errors(case: schemathesis.Case) -> None:
    _aim_at_real_threads(case, THREAD)
    case.call_and_validate(checks=[not_a_server_error])


def _postgres_app() -> tuple[Any, str, Exception | None]:
    """An app over a populated PostgreSQL thread, built when the module loads (schemathesis
    reads the schema then); a server that does not answer is reported by the test."""
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row

    from ..conversation import agent_graph

    thread = f"fuzz-{uuid4().hex[:12]}"
    try:
        connection = psycopg.Connection.connect(
            PG_DSN, autocommit=True, prepare_threshold=0, row_factory=dict_row, connect_timeout=3
        )
    except psycopg.OperationalError as error:
        return create_app(PruningInMemorySaver()), thread, error
    atexit.register(connection.close)
    saver = PostgresSaver(connection)  # type: ignore[arg-type]
    saver.setup()
    agent = agent_graph(saver, 1)
    for text in ["put k=a", "chat", "put k=b j=1", "put versions=v"]:
        agent.invoke({"messages": [("user", text)]}, {"configurable": {"thread_id": thread}})
    return create_app(saver), thread, None


PG_APP, PG_THREAD, PG_ERROR = _postgres_app()
postgres_schema = schemathesis.openapi.from_asgi("/openapi.json", PG_APP)


@pytest.mark.postgres
@postgres_schema.parametrize()
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_server_errors_on_postgres(case: schemathesis.Case) -> None:
    if PG_ERROR is not None:
        postgres_unavailable(PG_ERROR)
    _aim_at_real_threads(case, PG_THREAD)
    case.call_and_validate(checks=[not_a_server_error])
