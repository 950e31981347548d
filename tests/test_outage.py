"""A PostgreSQL outage: while the database is away the HTTP API answers 503 Problem JSON with
``Retry-After`` within its deadline and never hangs, and it serves again as soon as the
database answers. Against a server of the test's own (``tests.pg_instance``), never the
shared one."""

from __future__ import annotations

import asyncio
import time
from typing import Any
from uuid import uuid4

import httpx

from mcp_state_versions.agent.build import run_turn
from mcp_state_versions.api import create_app
from mcp_state_versions.demo.run import GAZETTEER
from mcp_state_versions.savers.postgres import open_postgres_saver

from .helpers import BBOX, agent_on
from .pg_instance import postgres_instance

CPH = GAZETTEER["copenhagen"]["bbox"]


async def test_an_outage_is_answered_503_in_time_and_recovery_is_immediate() -> None:
    with postgres_instance() as server:
        async with open_postgres_saver(server.dsn) as saver:
            agent = agent_on(saver, ring_size=0)
            thread_id = f"outage-{uuid4().hex[:12]}"
            for text in ["find Copenhagen", "find Aarhus"]:
                await run_turn(agent, thread_id, text)
            transport = httpx.ASGITransport(app=create_app(saver))
            async with httpx.AsyncClient(
                transport=transport, base_url="http://test", timeout=30
            ) as http:
                url = f"/threads/{thread_id}/state/{BBOX}"
                assert (await http.get(url, params={"turn": 1})).json()["value"] == CPH

                server.stop()

                async def timed(params: dict[str, Any]) -> tuple[httpx.Response, float]:
                    started = time.monotonic()
                    response = await http.get(url, params=params)
                    return response, time.monotonic() - started

                requests = [timed({"turn": 1}), timed({}), timed({"turn": 2})] * 4
                for response, took in await asyncio.gather(*requests):
                    assert response.status_code == 503, response.text
                    assert response.headers["content-type"] == "application/problem+json"
                    assert response.headers["retry-after"].isdigit()
                    assert response.json()["code"] == "store_unavailable"
                    assert took <= 5.0, took

                server.start()
                back = time.monotonic()
                while (await http.get(url, params={"turn": 1})).status_code != 200:
                    assert time.monotonic() - back < 5.0, "not serving 5 s after the database"
                    await asyncio.sleep(0.1)
                assert (await http.get(url, params={"turn": 1})).json()["value"] == CPH
