"""A second OS process on the same thread, between this process's steps: its edits and its
turns are read by this process as by a fresh one, in every durability mode, on SQLite and
PostgreSQL, each read checked against a notebook of what both processes did. (Its resumes of
this process's paused calls are in ``test_resumes.py``.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from uuid import uuid4

import pytest

from .conftest import PG_DSN, open_backend
from .conversation import PUT, Conversation, agent_graph


def _other_process(where: str, thread_id: str, edit: str, text: str) -> None:
    command = [sys.executable, "-m", "tests.workers", "edit-run", where, thread_id, edit, text]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.stdout.strip() == "ran", done.stderr


@pytest.mark.parametrize("durability", ["async", "sync", "exit"])
@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def test_another_process_edits_and_runs_between_this_process_s_turns(
    kind: str, durability: str, tmp_path: Path
) -> None:
    """This process runs turns; between them another process edits a key and runs a turn of
    its own. Every read of every key at every turn, through this process's saver (which
    remembers what it stored) and a fresh one, equals the notebook, after every step."""
    thread_id = f"procs-{uuid4().hex}"
    where = str(tmp_path / "t.sqlite") if kind == "sqlite" else PG_DSN
    async with await open_backend(kind, tmp_path) as saver:
        conv = Conversation(agent_graph(saver, 2), saver, thread_id)
        for step in range(3):
            await conv.say(f"put k=A{step} m=M{step}", durability=durability)
            await conv.check()
            _other_process(where, thread_id, f"k=E{step}", f"put j=B{step}")
            conv.notebook.current[PUT + "k"] = f"E{step}"
            conv.notebook.turn([("j", f"B{step}")])
            head = (await conv.graph.aget_state(conv.config)).config["configurable"]
            conv.end_ids.append(head["checkpoint_id"])
            await conv.check()
            async with await open_backend(kind, tmp_path) as fresh:
                await conv.check(fresh)
        await conv.say("put k=last", durability=durability)
        await conv.check()
        async with await open_backend(kind, tmp_path) as fresh:
            await conv.check(fresh)
