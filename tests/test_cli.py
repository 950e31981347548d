"""The command line against a SQLite file produced by the demo, run as a user runs it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from mcp_state_versions.cli import main
from mcp_state_versions.demo.run import chat_model

from .helpers import cli_command, free_port, wait_for_http

BBOX = "gazet/get_aoi/bbox"


@pytest.fixture(scope="module")
def demo_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str, str]:
    """Run the installed console script's demo once; return (spec, act-1 thread, act-2 thread)."""
    return _run_demo(tmp_path_factory.mktemp("demo") / "demo.sqlite")


@pytest.fixture(scope="module")
def untouched_demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str, str]:
    """A demo file no test writes to (``demo_file`` is pruned by some)."""
    return _run_demo(tmp_path_factory.mktemp("untouched") / "demo.sqlite")


def _run_demo(path: Path) -> tuple[str, str, str]:
    """The demo's threads written afresh into `path`: (spec, act-1 thread, act-2 thread)."""
    spec = f"sqlite:{path}"
    script = Path(sys.executable).with_name("mcp-state-versions")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "mcp_state_versions.cli"]
    done = subprocess.run(
        [*command, "demo", "--checkpointer", spec],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert "rewritten, 2 versions" in done.stdout
    first = re.search(r"demo-act-1-\w+", done.stdout)
    second = re.search(r"demo-act-2-\w+", done.stdout)
    assert first and second, done.stdout
    return spec, first.group(), second.group()


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    """The exit code, and standard output when it is 0, standard error otherwise: a value goes
    to one, an outcome to the other, never both."""
    code = main(list(args))
    captured = capsys.readouterr()
    if code == 0:
        assert captured.err == "", captured.err
        return code, captured.out
    assert captured.out == "", captured.out
    return code, captured.err


def test_inspect_lists_reads_and_distinguishes_outcomes(
    demo_file: tuple[str, str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    spec, thread, _ = demo_file
    base = ["inspect", "--checkpointer", spec, "--thread", thread]
    code, out = run(capsys, *base)
    assert code == 0 and BBOX in out and "2 (rewritten)" in out

    code, out = run(capsys, *base, BBOX, "--turn", "1", "--json")
    assert code == 0 and json.loads(out)["value"] == [12.4, 55.5, 12.7, 55.8]

    code, out = run(capsys, *base, BBOX, "--turn", "9", "--json")
    assert code == 3 and json.loads(out)["outcome"] == "turn_never_happened"

    code, out = run(capsys, *base, BBOX, "--versions", "--json")
    listed = json.loads(out)
    assert code == 0 and listed["value"] == [9.9, 56.1, 10.3, 56.2]
    assert listed["outcome"] == "found"  # as --turn reads say it
    code, out = run(capsys, *base, "--json")
    assert code == 0 and json.loads(out)["outcome"] == "found"
    for listing in (["turns", "--thread", thread], ["threads"]):  # every read's JSON says it
        code, out = run(capsys, *listing, "--checkpointer", spec, "--json")
        assert code == 0 and json.loads(out)["outcome"] == "found"
    assert [(i["since"], i["until"], i["status"], i["value"]) for i in listed["items"]] == [
        (1, 2, "kept", [12.4, 55.5, 12.7, 55.8]),
        (3, None, "kept", [9.9, 56.1, 10.3, 56.2]),
    ]

    code, out = run(capsys, *base, "gazet/get_aoi/nope")
    assert code == 6 and out.startswith("mcp-state-versions: unknown_key: no key ")
    assert "did you mean gazet/get_aoi/name, " in out  # for a person: no advice to a model
    assert "Do not" not in out and "call" not in out

    code, out = run(capsys, "inspect", "--checkpointer", spec, "--thread", "no-such-thread")
    assert code == 6


def test_turns_and_prune_and_the_pruned_outcome(
    demo_file: tuple[str, str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    spec, first, second = demo_file
    code, out = run(capsys, "turns", "--checkpointer", spec, "--thread", second, "--json")
    assert code == 0 and json.loads(out) == {
        "outcome": "found",
        "thread_id": second,
        "total": 3,
        "retained": {"first": 2, "last": 3},
    }
    # The demo pruned act 2's thread (ring_size=0) to its last turn before turn 3 began.
    base = ["inspect", "--checkpointer", spec, "--thread", second, BBOX]
    code, out = run(capsys, *base, "--turn", "1", "--json")
    assert code == 4 and json.loads(out)["retained"] == {"first": 2, "last": 3}
    assert run(capsys, *base, "--turn", "2")[0] == 0

    code, out = run(
        capsys, "prune", "--checkpointer", spec, "--thread", first, "--keep-turns", "1", "--yes"
    )
    assert code == 0 and "of its 4 turns, turn 4 retained" in out
    code, out = run(
        capsys, "inspect", "--checkpointer", spec, "--thread", first, BBOX, "--turn", "1"
    )
    assert code == 0 and "12.4" in out  # still held by the key's ring


def test_bad_usage_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["turns", "--checkpointer", "nosuch:x", "--thread", "t"]) == 2
    assert "unknown checkpointer" in capsys.readouterr().err


def test_a_real_model_is_asked_for_by_provider_and_errors_say_what_to_install() -> None:
    with pytest.raises(ValueError, match=r"cannot load 'openai:gpt-4o'.*langchain-openai"):
        chat_model("openai:gpt-4o")


def test_every_command_takes_json() -> None:
    from mcp_state_versions.cli import _parser

    commands = _parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    missing = [name for name, parser in commands.items() if "--json" not in parser.format_help()]
    assert missing == []


def test_a_run_adds_only_its_own_commands_arguments() -> None:
    """Parsing ``turns`` adds ``turns``'s arguments and no other command's; each command's
    help, asked for alone, still shows its own (``test_every_command_takes_json``)."""
    from mcp_state_versions.cli import _parser

    parser = _parser()
    commands = parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    args = parser.parse_args(["turns", "--checkpointer", "memory", "--thread", "t", "--json"])
    assert (args.command, args.thread, args.json) == ("turns", "t", True)
    added = {name: [a.dest for a in command._actions] for name, command in commands.items()}
    assert added.pop("turns") == ["help", "checkpointer", "thread", "namespace", "checkpoint",
                                  "json"]  # fmt: skip
    assert set(map(tuple, added.values())) == {("help",)}
    assert "--keep-turns" in commands["sweep"].format_usage()


def test_demo_json_is_one_turn_a_line(tmp_path: Path) -> None:
    done = subprocess.run(
        [*cli_command(), "demo", "--db", str(tmp_path / "d.sqlite"), "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    turns = [json.loads(line) for line in done.stdout.splitlines()]
    assert [turn["turn"] for turn in turns] == [1, 2, 3, 4, 1, 2, 3]
    assert turns[0]["user"] == "Find the area of interest for Copenhagen."
    assert turns[0]["steps"][0] == {"call": "get_aoi", "args": {"place": "Copenhagen"}}
    assert any("rewritten, 2 versions" in step.get("tool", "") for step in turns[2]["steps"])


def test_index_and_serve_json(demo_file: tuple[str, str, str], tmp_path: Path) -> None:
    import shutil

    spec, first, _ = demo_file
    copy = tmp_path / "copy.sqlite"
    shutil.copy(spec.removeprefix("sqlite:"), copy)
    done = subprocess.run(
        [*cli_command(), "index", "--checkpointer", f"sqlite:{copy}", "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(done.stdout)["index"].startswith("mcp_state_versions_lineage")
    assert json.loads(done.stdout)["indexes"][1].startswith("mcp_state_versions_whole")
    with free_port() as port:
        server = subprocess.Popen(
            [*cli_command(), "serve", "--checkpointer", spec, "--port", str(port), "--json"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
    try:
        assert server.stdout is not None
        where = json.loads(server.stdout.readline())
        assert where == {"url": f"http://127.0.0.1:{port}", "sweep": False}
        response = wait_for_http(f"{where['url']}/threads/{first}/turns", server)
        assert response.status_code == 200 and response.json()["thread_id"] == first
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_titles_and_keys_are_never_wrapped_inside_a_key(demo_file: tuple[str, str, str]) -> None:
    """On a terminal 30 columns wide, each key and the title stay whole on one line."""
    spec, first, _ = demo_file
    done = subprocess.run(
        [*cli_command(), "inspect", "--checkpointer", spec, "--thread", first],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "COLUMNS": "30"},
    )
    lines = done.stdout.splitlines()
    assert lines[0] == f"thread {first} · turn 4 · 3 keys"
    for key in (BBOX, "gazet/get_aoi/country", "gazet/get_aoi/name"):
        assert any(key in line for line in lines), (key, done.stdout)
    done = subprocess.run(
        [*cli_command(), "inspect", "--checkpointer", spec, "--thread", first, BBOX, "--versions"],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "COLUMNS": "30"},
    )
    assert done.stdout.splitlines()[0] == f"{BBOX} · 2 versions · thread {first}"


def test_an_evicted_value_is_listed_as_evicted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import asyncio

    from mcp_state_versions.agent.build import run_turn
    from mcp_state_versions.savers.specs import open_checkpointer

    from .helpers import agent_on

    spec = f"sqlite:{tmp_path / 'small.sqlite'}"

    async def fill() -> None:
        async with open_checkpointer(spec) as saver:
            agent = agent_on(saver, budget_bytes=20)  # less than one turn publishes
            for text in ["find Copenhagen", "find Oslo"]:
                await run_turn(agent, "t", text)

    asyncio.run(fill())
    code = main(["inspect", "--checkpointer", spec, "--thread", "t", "--json"])
    rows = {row["key"]: row for row in json.loads(capsys.readouterr().out)["keys"]}
    assert code == 0
    assert any(row["evicted"] and row["shape"] == "(evicted)" for row in rows.values())
    assert all(row["shape"] != "null" for row in rows.values())
    evicted = next(key for key, row in rows.items() if row["evicted"])
    code = main(["inspect", "--checkpointer", spec, "--thread", "t", evicted, "--json"])
    assert code == 4 and json.loads(capsys.readouterr().err)["outcome"] == "value_evicted"


# -- bad paths, as a user meets them: one line, no traceback, the documented exit code ----------


def _cli(*args: str, prelude: str = "") -> subprocess.CompletedProcess[str]:
    code = (
        f"{prelude}import sys; from mcp_state_versions.cli import main; "
        "sys.exit(main(sys.argv[1:]))"
    )
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=60
    )


def _one_line(done: subprocess.CompletedProcess[str], code: int, *fragments: str) -> None:
    output = (done.stdout + done.stderr).strip()
    assert done.returncode == code, output
    assert "Traceback" not in output and len(output.splitlines()) == 1, output
    for fragment in fragments:
        assert fragment in output, output


@pytest.mark.parametrize(
    ("dsn", "code", "fragment"),
    [
        ("postgresql://postgres@127.0.0.1:1/test", 9, "127.0.0.1"),  # no server: a store down
        ("postgresql://no_such_role@127.0.0.1:5432/test", 2, "no_such_role"),
        ("postgresql://postgres@127.0.0.1:5432/no_such_database", 2, "no_such_database"),
        ("postgres:not-a-dsn", 2, "cannot connect to PostgreSQL"),
    ],
)
def test_a_bad_dsn_fails_in_one_line(dsn: str, code: int, fragment: str) -> None:
    """A server that does not answer is a store unavailable (exit 9); one that answers that
    the role or database does not exist, or a DSN that is not one, is bad usage (exit 2)."""
    done = _cli("turns", "--checkpointer", dsn, "--thread", "t")
    _one_line(done, code, "cannot connect to PostgreSQL", fragment)


def test_sqlite_paths_that_do_not_exist(tmp_path: Path) -> None:
    missing_dir = tmp_path / "nowhere" / "x.sqlite"
    _one_line(
        _cli("turns", "--checkpointer", f"sqlite:{missing_dir}", "--thread", "t"),
        2,
        "does not exist",
    )
    missing = tmp_path / "missing.sqlite"
    for command in ("inspect", "turns", "prune"):
        extra = ["--keep-turns", "1"] if command == "prune" else []
        done = _cli(command, "--checkpointer", f"sqlite:{missing}", "--thread", "t", *extra)
        _one_line(done, 2, "no SQLite file")
        assert not missing.exists()


def test_the_postgres_extra_missing_is_one_line() -> None:
    done = _cli(
        "turns",
        "--checkpointer",
        "postgres:postgresql://postgres@127.0.0.1/test",
        "--thread",
        "t",
        prelude="import sys; sys.modules['psycopg'] = None; ",
    )
    _one_line(done, 2, "pip install 'mcp-state-versions[postgres]'")


def test_flags_that_do_not_apply_are_refused(demo_file: tuple[str, str, str]) -> None:
    spec, thread, _ = demo_file
    base = ["inspect", "--checkpointer", spec, "--thread", thread]
    _one_line(_cli(*base, "--turn", "1"), 2, "give the KEY")
    _one_line(_cli(*base, "--versions"), 2, "give the KEY")
    _one_line(_cli(*base, BBOX, "--turn", "1", "--versions"), 2, "either --turn N")
    prune = ["prune", "--checkpointer", spec, "--thread", thread]
    _one_line(_cli(*prune), 2, "--keep-turns N, --drop-abandoned")
    _one_line(_cli(*prune, "--keep-turns", "0"), 2, "--keep-turns must be at least 1")


def test_unknown_threads_exit_6_everywhere_and_ids_print_literally(
    demo_file: tuple[str, str, str],
) -> None:
    spec, _, _ = demo_file
    for thread in ["nope", "[/]", "[bold]x"]:
        for command in (["inspect"], ["turns"], ["prune", "--keep-turns", "1"]):
            done = _cli(command[0], "--checkpointer", spec, "--thread", thread, *command[1:])
            _one_line(done, 6, "unknown_thread", f"no thread {thread!r}")


def test_help_and_version() -> None:
    done = _cli("--help")
    assert done.returncode == 0
    assert "exit codes:" in done.stdout and "6  unknown thread, checkpoint or key" in done.stdout
    from mcp_state_versions.cli import _COMMANDS

    for command in _COMMANDS:  # an example each; the exit codes once, in the main help
        done = _cli(command, "--help")
        assert f"example:\n  mcp-state-versions {command} " in done.stdout, command
        assert "6  unknown thread" not in done.stdout, command
    assert "'sqlite:PATH'" in _cli("inspect", "--help").stdout
    done = _cli("--version")
    assert done.returncode == 0 and done.stdout.startswith("mcp-state-versions 0.")


def _digest(path: Path) -> tuple[bytes, bytes]:
    """A SQLite database's content, byte for byte: the file and what its WAL holds. (A reader
    of a WAL database may create the empty ``-wal`` and ``-shm`` files SQLite reads through.)"""
    wal = path.with_name(path.name + "-wal")
    return path.read_bytes(), wal.read_bytes() if wal.exists() else b""


def test_readers_change_nothing_in_the_file_they_read(
    demo_file: tuple[str, str, str], tmp_path: Path
) -> None:
    """``inspect`` and ``turns`` open SQLite read-only: a file written by the stock saver
    (no lineage index) is left byte for byte as it was, and a file that is not a checkpoint
    database is told so in one line, without LangGraph's tables created in it."""
    import asyncio
    import shutil
    import sqlite3

    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    from mcp_state_versions.agent.build import run_turn

    from .helpers import agent_on

    stock = tmp_path / "stock.sqlite"

    async def write() -> None:
        async with AsyncSqliteSaver.from_conn_string(str(stock)) as saver:
            for text in ["find Copenhagen", "find Aarhus"]:
                await run_turn(agent_on(saver, ring_size=0), "stock-thread", text)

    asyncio.run(write())
    before = _digest(stock)
    for command in (["turns"], ["inspect"], ["inspect", BBOX, "--turn", "1"]):
        done = _cli(command[0], "--checkpointer", f"sqlite:{stock}", "--thread", "stock-thread",
                    *command[1:])  # fmt: skip
        assert done.returncode == 0, done.stderr
    assert _digest(stock) == before
    with sqlite3.connect(stock) as db:
        indexes = {row[0] for row in db.execute("SELECT name FROM sqlite_master")}
    assert not any(name.startswith("mcp_state_versions") for name in indexes)

    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE notes (body TEXT)")
    before = _digest(other)
    text = tmp_path / "notes.txt"
    text.write_text("not a database\n")
    for path, fragment in [(other, "not a LangGraph checkpoint database"),
                           (text, "is not a SQLite database")]:  # fmt: skip
        for command in ("turns", "inspect"):
            done = _cli(command, "--checkpointer", f"sqlite:{path}", "--thread", "t")
            _one_line(done, 7, fragment)
    assert _digest(other) == before

    _one_line(
        _cli("turns", "--checkpointer", f"sqlite:{tmp_path}", "--thread", "t"), 2, "directory"
    )
    copy = tmp_path / "copy.sqlite"
    shutil.copy(stock, copy)
    done = _cli("index", "--checkpointer", f"sqlite:{copy}")
    assert done.returncode == 0 and "mcp_state_versions_lineage" in done.stdout, done.stderr
    with sqlite3.connect(copy) as db:
        indexes = {row[0] for row in db.execute("SELECT name FROM sqlite_master")}
    from mcp_state_versions.backends.sqlite import INDEX_NAME

    assert INDEX_NAME in indexes


@pytest.mark.postgres
def test_postgres_readers_need_only_select_and_set_nothing_up() -> None:
    """A read command on PostgreSQL sets nothing up and writes nothing: a role granted only
    ``SELECT`` on LangGraph's tables reads a thread (dry runs and ``serve`` included); a
    database without those tables, or with them at an older migration, is told so in one line
    (exit 7) and left as it was; and the server itself refuses a write through a reader's
    saver."""
    import asyncio
    from uuid import uuid4

    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.conninfo import make_conninfo

    from mcp_state_versions.agent.build import run_turn
    from mcp_state_versions.savers.postgres import open_postgres_saver
    from mcp_state_versions.savers.specs import open_checkpointer

    from .conftest import PG_DSN, postgres_unavailable
    from .helpers import agent_on

    try:
        admin = psycopg.connect(PG_DSN, autocommit=True, connect_timeout=3)
    except psycopg.OperationalError as error:
        postgres_unavailable(error)
    suffix = uuid4().hex[:12]
    role, database, thread = f"msv_reader_{suffix}", f"msv_empty_{suffix}", f"ro-{suffix}"

    async def write() -> None:
        async with open_postgres_saver(PG_DSN) as saver:
            for text in ["find Copenhagen", "find Aarhus"]:
                await run_turn(agent_on(saver, ring_size=0), thread, text)

    async def delete_through_a_reader() -> None:
        async with open_checkpointer(f"postgres:{PG_DSN}", read_only=True) as saver:
            with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
                await saver.adelete_thread(thread)

    async def grant_revoked_while_reading() -> None:
        """A grant taken away between the open's check and the read: the read says the store
        refused it, never that the thread is damaged."""
        from mcp_state_versions import CheckpointHistory, StoreUnavailable

        async with open_checkpointer(reader, read_only=True) as saver:
            admin.execute(f'REVOKE SELECT ON checkpoint_writes FROM "{role}"')
            try:
                with pytest.raises(StoreUnavailable, match="refused") as raised:
                    await CheckpointHistory(saver).present(thread)
            finally:
                admin.execute(f'GRANT SELECT ON checkpoint_writes TO "{role}"')
        assert raised.value.refused

    def tables(dsn: str) -> int:
        with psycopg.connect(dsn) as connection:
            found = connection.execute(
                "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"
            ).fetchone()
        return found[0] if found else 0

    asyncio.run(write())
    try:
        admin.execute(f'CREATE ROLE "{role}" LOGIN')
        admin.execute(
            "GRANT SELECT ON checkpoints, checkpoint_writes, checkpoint_blobs, "
            f'checkpoint_migrations TO "{role}"'
        )
        reader = f"postgres:{make_conninfo(PG_DSN, user=role)}"
        for command in (
            ["turns"],
            ["prune", "--keep-turns", "1", "--dry-run"],
            ["inspect"],
            ["inspect", BBOX, "--turn", "1", "--json"],
        ):
            done = _cli(command[0], "--checkpointer", reader, "--thread", thread, *command[1:])
            assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
        assert json.loads(done.stdout)["value"] == [12.4, 55.5, 12.7, 55.8]
        done = _cli("threads", "--checkpointer", reader, "--contains", suffix, "--json")
        assert done.returncode == 0, done.stderr
        assert [t["thread_id"] for t in json.loads(done.stdout)["threads"]] == [thread]

        with free_port() as port:
            server = subprocess.Popen(
                [*cli_command(), "serve", "--checkpointer", reader, "--port", str(port)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        try:
            url = f"http://127.0.0.1:{port}/threads/{thread}"
            assert wait_for_http(f"{url}/turns", server).json()["total"] == 2
            for path in ("/timeline", "/turns/1", f"/state/{BBOX}/versions"):
                assert wait_for_http(url + path, server).status_code == 200, path
            admin.execute(f'REVOKE SELECT ON checkpoint_writes FROM "{role}"')
            try:
                refused = wait_for_http(f"{url}/state", server)
            finally:
                admin.execute(f'GRANT SELECT ON checkpoint_writes TO "{role}"')
            assert refused.status_code == 503 and "Retry-After" not in refused.headers
            assert "refused" in refused.json()["detail"], refused.json()
        finally:
            server.terminate()
            server.wait(timeout=10)

        asyncio.run(delete_through_a_reader())
        assert _cli("turns", "--checkpointer", reader, "--thread", thread).returncode == 0
        done = _cli(
            "prune", "--checkpointer", reader, "--thread", thread, "--keep-turns", "1", "--yes"
        )
        _one_line(done, 9, "permission denied")  # a writer's command, and a role that reads

        asyncio.run(grant_revoked_while_reading())
        admin.execute(f'REVOKE SELECT ON checkpoint_writes, checkpoint_blobs FROM "{role}"')
        for command in ("turns", "inspect"):
            done = _cli(command, "--checkpointer", reader, "--thread", thread)
            _one_line(done, 9, "refused", "may not read checkpoint_writes, checkpoint_blobs",
                      f'GRANT SELECT ON checkpoints, checkpoint_writes, checkpoint_blobs, '
                      f'checkpoint_migrations TO "{role}"')  # fmt: skip

        admin.execute(f'CREATE DATABASE "{database}"')
        empty = make_conninfo(PG_DSN, dbname=database)
        done = _cli("turns", "--checkpointer", f"postgres:{empty}", "--thread", "t")
        _one_line(done, 7, "no LangGraph checkpoint tables")
        assert tables(empty) == 0
        with PostgresSaver.from_conn_string(empty) as saver:
            saver.setup()
        with psycopg.connect(empty, autocommit=True) as connection:
            connection.execute("DELETE FROM checkpoint_migrations WHERE v > 5")
        done = _cli("inspect", "--checkpointer", f"postgres:{empty}", "--thread", "t")
        _one_line(done, 7, "at migration 5", "saver.setup()")
    finally:
        admin.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        if admin.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone():
            admin.execute(f'DROP OWNED BY "{role}"')  # its grants
            admin.execute(f'DROP ROLE "{role}"')
        admin.close()


def test_prune_on_a_file_it_cannot_write_is_one_line() -> None:
    """Without write access to the file: read-only by its mode, or, for root (who writes
    through any mode), immutable (``chattr +i``)."""
    import asyncio
    import os
    import shutil
    import tempfile

    from mcp_state_versions.agent.build import run_turn
    from mcp_state_versions.savers.sqlite import PruningSqliteSaver

    from .helpers import agent_on

    folder = Path(tempfile.mkdtemp(prefix="read-only-"))
    copy = folder / "threads.sqlite"
    thread = "three-turns"

    async def write() -> None:
        async with PruningSqliteSaver.from_conn_string(str(copy)) as saver:
            for text in ["find Copenhagen", "find Aarhus", "find Oslo"]:
                await run_turn(agent_on(saver, ring_size=0), thread, text)

    asyncio.run(write())
    as_root = os.geteuid() == 0
    if as_root:
        subprocess.run(["chattr", "+i", str(copy)], check=True)
    else:
        copy.chmod(0o444)
    try:
        done = _cli(
            "prune", "--checkpointer", f"sqlite:{copy}", "--thread", thread, "--keep-turns", "1",
            "--yes",
        )  # fmt: skip
        _one_line(done, 9, f"cannot use sqlite:{copy}")
    finally:
        if as_root:
            subprocess.run(["chattr", "-i", str(copy)], check=True)
        shutil.rmtree(folder, ignore_errors=True)


def test_serve_refuses_ports_it_cannot_use_in_one_line(demo_file: tuple[str, str, str]) -> None:
    import socket

    spec, _, _ = demo_file
    for port in ("-1", "70000", "http"):
        done = _cli("serve", "--checkpointer", spec, "--port", port)
        assert done.returncode == 2 and "a port is a number from 1 to 65535" in done.stderr
        assert "Traceback" not in done.stderr
    with socket.create_server(("127.0.0.1", 0)) as busy:
        port = str(busy.getsockname()[1])
        done = _cli("serve", "--checkpointer", spec, "--port", port)
    _one_line(done, 10, f"cannot listen on 127.0.0.1:{port}")


def test_sweep_from_the_command_line(tmp_path: Path) -> None:
    """A dry run first (read-only: the file is unchanged), then the real sweep with --yes
    gives the same figures, and --vacuum reports what it freed; without --yes and no
    terminal to ask at, it refuses in one line."""
    import asyncio

    from mcp_state_versions.agent.build import run_turn
    from mcp_state_versions.savers.sqlite import PruningSqliteSaver

    from .helpers import agent_on

    path = tmp_path / "many.sqlite"

    async def write() -> None:
        async with PruningSqliteSaver.from_conn_string(str(path)) as saver:
            for thread in ("one", "two", "three"):
                for text in ["find Copenhagen", "find Aarhus", "find Oslo"]:
                    await run_turn(agent_on(saver, ring_size=0), thread, text)

    asyncio.run(write())
    spec = f"sqlite:{path}"
    before = _digest(path)
    done = _cli("sweep", "--checkpointer", spec, "--keep-turns", "1", "--dry-run", "--json")
    assert done.returncode == 0, done.stderr
    planned = json.loads(done.stdout)
    assert planned["dry_run"] and planned["threads_pruned"] == 3
    assert planned["checkpoints_removed"] > 0 and _digest(path) == before
    _one_line(_cli("sweep", "--checkpointer", spec, "--keep-turns", "1"), 2, "--yes")
    _one_line(_cli("sweep", "--checkpointer", spec), 2, "say what to sweep")
    done = _cli("sweep", "--checkpointer", spec, "--idle-for", "soon")
    assert done.returncode == 2 and "a duration is a number and a unit" in done.stderr
    done = _cli("sweep", "--checkpointer", spec, "--keep-turns", "1", "--yes", "--vacuum",
                "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    for figure in ("threads_pruned", "checkpoints_removed", "bytes_removed"):
        assert report[figure] == planned[figure], figure
    assert report["bytes_reclaimed"] > 0 and not report["dry_run"]
    done = _cli("sweep", "--checkpointer", spec, "--keep-turns", "1", "--yes")
    assert done.returncode == 0 and "removed 0 checkpoints" in done.stdout, done.stdout
    done = _cli("prune", "--checkpointer", spec, "--thread", "one", "--keep-turns", "1",
                "--dry-run")  # fmt: skip
    assert done.returncode == 0 and "would remove 0 checkpoints" in done.stdout, done.stdout


def test_counts_and_spans_are_worded_in_the_right_number() -> None:
    from mcp_state_versions.wording.answers import counted, version_span

    assert counted(1, "version") == "1 version" and counted(3, "version") == "3 versions"
    assert version_span(3, 3) == "turn 3"
    assert version_span(3, 5) == "turns 3–5" and version_span(3, None) == "turns 3–now"


def test_serve_takes_its_token_from_a_file_and_refuses_an_open_public_host(
    demo_file: tuple[str, str, str], tmp_path: Path
) -> None:
    spec, first, _ = demo_file
    _one_line(_cli("serve", "--checkpointer", spec, "--host", "0.0.0.0"), 2, "--allow-open")
    empty = tmp_path / "empty"
    empty.write_text("\n")
    _one_line(_cli("serve", "--checkpointer", spec, "--token-file", str(empty)), 2, "is empty")
    token = tmp_path / "token"
    token.write_text("s3cret-token\n")
    with free_port() as port:
        server = subprocess.Popen(
            [*cli_command(), "serve", "--checkpointer", spec, "--port", str(port), "--json",
             "--token-file", str(token)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )  # fmt: skip
    try:
        assert server.stdout is not None
        url = json.loads(server.stdout.readline())["url"]
        refused = wait_for_http(f"{url}/threads/{first}/turns", server)
        assert refused.status_code == 401
        import httpx

        headers = {"Authorization": "Bearer s3cret-token"}
        answered = httpx.get(f"{url}/threads/{first}/turns", headers=headers, timeout=10)
        assert answered.status_code == 200
    finally:
        server.terminate()
        server.wait(timeout=10)
    done = _cli("serve", "--help")
    assert "--token-file" in done.stdout and "--allow-open" in done.stdout


@pytest.mark.parametrize("flag", ["--version", "--help"])
def test_help_and_version_load_no_langgraph(flag: str) -> None:
    """``--help`` and ``--version`` answer without importing LangGraph or LangChain (what made
    them take seconds): the package imports its names when first used."""
    code = (
        "import sys\nfrom mcp_state_versions.cli import main\n"
        f"try:\n    main([{flag!r}])\nexcept SystemExit:\n    pass\n"
        "loaded = [m for m in sys.modules if m.startswith(('langgraph', 'langchain'))]\n"
        "print(len(loaded), loaded[:3], file=sys.stderr)\nsys.exit(1 if loaded else 0)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


RUNTIME = ("langgraph.types", "langgraph.channels", "langgraph.graph", "langgraph.pregel")


@pytest.mark.parametrize(
    "command",
    [
        ["turns"],
        ["inspect"],
        ["inspect", BBOX, "--turn", "1"],
        ["inspect", BBOX, "--versions"],
        ["threads"],
    ],
)
def test_read_commands_load_no_langgraph_runtime(
    untouched_demo: tuple[str, str, str], command: list[str]
) -> None:
    """A read imports LangGraph's saver and what stored values are made of, never LangGraph's
    runtime (its channels, graphs and ``langgraph.types``, which were most of a read's
    start-up): the channels the library declares live in ``mcp_state_versions.storage.channels``,
    imported only by a graph, and a replay asks for an ``Overwrite`` without importing it."""
    spec, thread, _ = untouched_demo
    where = [] if command == ["threads"] else ["--thread", thread]
    args = [command[0], "--checkpointer", spec, *where, *command[1:]]
    code = (
        "import sys\nfrom mcp_state_versions.cli import main\n"
        f"code = main({args!r})\n"
        f"loaded = [m for m in sys.modules if m.startswith({RUNTIME!r})]\n"
        "print(code, loaded[:3], file=sys.stderr)\nsys.exit(1 if loaded or code else 0)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("json_flag", [[], ["--json"]])
def test_turns_prints_without_rich(
    untouched_demo: tuple[str, str, str], json_flag: list[str]
) -> None:
    """``turns`` prints one line (or one small object) itself: Rich's import was most of what
    the read cost beyond the saver's own."""
    spec, thread, _ = untouched_demo
    args = ["turns", "--checkpointer", spec, "--thread", thread, *json_flag]
    code = (
        "import sys\nfrom mcp_state_versions.cli import main\n"
        f"code = main({args!r})\n"
        "sys.exit(code or ('rich' in sys.modules and 9))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    if json_flag:
        assert json.loads(done.stdout) == {
            "outcome": "found",
            "thread_id": thread,
            "total": 4,
            "retained": {"first": 3, "last": 4},
        }
    else:
        assert done.stdout == f"thread {thread}: 4 turns, retained: 3–4\n"


@pytest.fixture
def mount(tmp_path: Path) -> Iterator[tuple[Path, Callable[[], None]]]:
    """A directory on a file system of its own (tmpfs) and a call that makes it read-only,
    as a read-only volume or a snapshot mount is."""
    where = tmp_path / "mount"
    where.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(where)], capture_output=True
    )
    if done.returncode != 0:
        pytest.skip(f"mounting a file system needs root here: {done.stderr.decode().strip()}")

    def read_only() -> None:
        subprocess.run(["mount", "-o", "remount,ro", str(where)], check=True)

    try:
        yield where, read_only
    finally:
        subprocess.run(["umount", str(where)], check=True)


def test_readers_work_on_a_read_only_mount(
    demo_file: tuple[str, str, str], mount: tuple[Path, Callable[[], None]]
) -> None:
    """On a read-only mount SQLite cannot create the ``-shm`` index a WAL reader needs: the
    file is opened immutable there (it cannot change), and read as anywhere else; a file whose
    latest writes are still in its ``-wal`` is refused in one line, not read without them."""
    import shutil
    import sqlite3

    spec, first, _ = demo_file
    where, read_only = mount
    shutil.copy(spec.removeprefix("sqlite:"), where / "demo.sqlite")
    held = where / "held.sqlite"
    writer = sqlite3.connect(held)
    writer.execute("PRAGMA journal_mode=wal")
    writer.execute("PRAGMA wal_autocheckpoint=0")
    with sqlite3.connect(spec.removeprefix("sqlite:")) as source:
        source.backup(writer)
    writer.execute("CREATE TABLE later (x)")
    writer.commit()
    shutil.copy(held, where / "copied.sqlite")  # the file and its -wal, not the -shm
    shutil.copy(f"{held}-wal", where / "copied.sqlite-wal")
    writer.close()
    read_only()
    assert subprocess.run(["touch", str(where / "x")], capture_output=True).returncode != 0
    demo = f"sqlite:{where / 'demo.sqlite'}"
    for command in (
        ["threads"],
        ["turns", "--thread", first],
        ["inspect", "--thread", first, BBOX, "--turn", "1"],
    ):
        done = _cli(command[0], "--checkpointer", demo, *command[1:])
        assert done.returncode == 0, (command, done.stderr)
    assert (
        "55.5"
        in _cli("inspect", "--checkpointer", demo, "--thread", first, BBOX, "--turn", "1").stdout
    )
    done = _cli("threads", "--checkpointer", f"sqlite:{where / 'copied.sqlite'}")
    _one_line(done, 7, "copied.sqlite-wal", "writable directory")


def test_prune_and_sweep_on_a_full_disk_exit_9_in_one_line(
    tmp_path: Path, mount: tuple[Path, Callable[[], None]]
) -> None:
    """A store that cannot be written (no space left) is a store that does not answer: one
    line and exit 9, as for a read-only file, never a traceback; the file reads as before."""
    import shutil

    # A demo of its own: the shared one may have been pruned already, leaving nothing to write.
    spec, first, _ = _run_demo(tmp_path / "demo.sqlite")
    where, _ = mount
    copy = where / "demo.sqlite"
    shutil.copy(spec.removeprefix("sqlite:"), copy)
    before = _cli("inspect", "--checkpointer", f"sqlite:{copy}", "--thread", first, "--json")
    assert before.returncode == 0, before.stderr
    # Fill the file system, then free nothing: the next page SQLite writes finds no room.
    subprocess.run(["dd", "if=/dev/zero", f"of={where / 'filler'}", "bs=64k"], capture_output=True)
    assert shutil.disk_usage(where).free < 64 * 1024
    prune = ("prune", "--thread", first, "--keep-turns", "1", "--yes")
    sweep = ("sweep", "--keep-turns", "1", "--yes")
    for command in (prune, sweep):
        done = _cli(command[0], "--checkpointer", f"sqlite:{copy}", *command[1:])
        _one_line(done, 9, "full")
    after = _cli("inspect", "--checkpointer", f"sqlite:{copy}", "--thread", first, "--json")
    assert after.returncode == 0 and after.stdout == before.stdout, after.stderr


def test_every_command_is_documented_in_the_readme() -> None:
    """Each command has its row in the README's CLI table, and each exit code its words."""
    from mcp_state_versions.cli import _COMMANDS, EXIT_CODES

    readme = (Path(__file__).parents[1] / "README.md").read_text()
    table = readme[readme.index("## CLI") : readme.index("## HTTP")]
    assert [name for name in _COMMANDS if f"| `{name} " not in table] == []
    for code in sorted(set(EXIT_CODES.values())):
        assert f" {code} " in table.split("Exit codes:")[1][:900], code


def test_conversation_and_diff_read_turns_from_history(
    untouched_demo: tuple[str, str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """``conversation`` prints what was said in a turn (the page's turn panel), ``diff`` a
    value's change between two turns; each outcome has its read's exit code."""
    spec, thread, _ = untouched_demo
    base = ["--checkpointer", spec, "--thread", thread]
    code, out = run(capsys, "conversation", *base, "--turn", "3")
    assert code == 0 and out.startswith("turn 3\n  user:  Now find Aarhus.")
    assert 'call:  get_aoi {"place": "Aarhus"}' in out
    code, out = run(capsys, "conversation", *base, "--turns", "3-4", "--json")
    body = json.loads(out)
    assert body["outcome"] == "found" and [t["turn"] for t in body["turns"]] == [3, 4]
    assert body["turns"][0]["calls"][0]["args"] == {"place": "Aarhus"}
    code, err = run(capsys, "conversation", *base, "--turn", "1")  # the demo pruned it
    assert code == 4 and "turn_not_retained" in err
    code, err = run(capsys, "conversation", *base, "--turn", "9")
    assert code == 3 and "turn_never_happened" in err
    code, out = run(
        capsys, "diff", *base, "--key", "gazet/get_aoi/bbox", "--from", "1", "--to", "3"
    )
    assert code == 0 and "-  12.4," in out and "+  9.9," in out
    code, out = run(capsys, "diff", *base, "--key", BBOX, "--from", "1", "--to", "2", "--json")
    assert json.loads(out)["equal"] is True
    code, err = run(capsys, "diff", *base, "--key", BBOX, "--from", "1", "--to", "9")
    assert code == 3 and "turn_never_happened" in err
    with pytest.raises(SystemExit) as usage:
        main(["conversation", *base, "--turns", "1-9"])
    assert usage.value.code == 2 and "at most 5" in capsys.readouterr().err


def test_prune_asks_first_as_sweep_does(tmp_path: Path) -> None:
    """Without --yes and without a terminal, a prune that would remove something is refused
    (exit 2, nothing removed); --dry-run and --yes need no question; --json says its outcome."""
    spec, first, _ = _run_demo(tmp_path / "demo.sqlite")
    prune = ["prune", "--checkpointer", spec, "--thread", first, "--keep-turns", "1"]
    before = _cli("turns", "--checkpointer", spec, "--thread", first, "--json").stdout
    refused = _cli(*prune)
    _one_line(refused, 2, "pass --yes to go ahead, or --dry-run")
    assert _cli("turns", "--checkpointer", spec, "--thread", first, "--json").stdout == before
    done = _cli(*prune, "--yes", "--json")
    assert done.returncode == 0 and json.loads(done.stdout)["outcome"] == "found"


def test_mistakes_at_the_command_line_are_answered_in_one_line(
    untouched_demo: tuple[str, str, str], tmp_path: Path
) -> None:
    """A file given without ``sqlite:``, a key's last part alone, a namespace the thread does
    not have, a cursor no page printed, a bad value under --json, and an empty listing: each
    says what to do next."""
    spec, thread, _ = untouched_demo
    path = spec.removeprefix("sqlite:")
    _one_line(_cli("turns", "--checkpointer", path, "--thread", thread), 2, f"sqlite:{path}?")
    base = ["inspect", "--checkpointer", spec, "--thread", thread]
    _one_line(_cli(*base, "bbox"), 6, f"did you mean {BBOX}")
    _one_line(_cli(*base, "--namespace", "nosuch"), 6, "has no namespace 'nosuch'")
    listing = ["threads", "--checkpointer", spec]
    _one_line(_cli(*listing, "--before", "garbage"), 2, "--before takes the cursor")
    bad = _cli(*base, BBOX, "--turn", "x", "--json")
    assert bad.returncode == 2 and json.loads(bad.stderr)["outcome"] == "usage"
    empty = _cli(*listing, "--contains", "no-such-thread")
    assert empty.returncode == 0 and empty.stdout == ""
    assert "no threads whose id contains 'no-such-thread'" in empty.stderr
