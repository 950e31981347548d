"""Every code block in the README runs as written.

* ``python`` blocks run as scripts, each in a fresh interpreter in an empty directory;
* the first two ``sh`` blocks are the install commands: they must be exactly what ``.ci/run``
  runs (the test command) and what a newcomer runs for the demo (whose ``demo`` part runs here);
* the Agent Server ``sh`` block is what ``tests/test_agent_server.py`` does; its commands must
  name the same requirements file and flags;
* every other ``sh`` block runs as written, on its own, in a fresh bash in a directory holding
  only ``.venv`` (this environment), with nothing of it on ``PATH``;
* the ``json`` block is ``examples/agent_server/langgraph.json``;
* ``text`` blocks are the demo's output, and must still be what it prints.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
README = (ROOT / "README.md").read_text()
BLOCKS = re.findall(r"^```(\w+)\n(.*?)^```", README, flags=re.S | re.M)


def blocks(kind: str) -> list[str]:
    return [body for lang, body in BLOCKS if lang == kind]


def _env() -> dict[str, str]:
    bin_dir = str(Path(sys.executable).parent)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "COLUMNS": "120"}


def _run(command: list[str], cwd: Path, timeout: int = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=_env()
    )


@pytest.mark.parametrize("source", blocks("python"), ids=lambda s: s.splitlines()[0][:40])
def test_python_blocks_run(source: str, tmp_path: Path) -> None:
    done = _run([sys.executable, "-c", source], tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stderr == "", done.stderr  # quiet: no log lines (the MCP server's included)


def test_the_install_commands_are_what_ci_and_a_newcomer_run(tmp_path: Path) -> None:
    demo, tests = blocks("sh")[:2]
    ci = (ROOT / ".ci" / "run").read_text()
    assert tests.strip() in ci, "the README's test command must be the one .ci/run runs"
    assert demo.strip().startswith(
        'python3 -m venv .venv && .venv/bin/pip install -q -e ".[agents]" && '
    )
    done = subprocess.run(
        ["mcp-state-versions", "demo"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(),
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "demo.sqlite").exists()


def test_the_agent_server_block_is_what_its_test_runs() -> None:
    from .test_agent_server import EXAMPLE

    (block,) = [b for b in blocks("sh") if "langgraph dev" in b]
    assert f"-r {EXAMPLE.relative_to(ROOT)}/requirements.txt" in block
    assert '-e ".[agents,api]"' in block and "--no-browser --no-reload" in block


def _fresh_shell(script: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``script`` in a new bash, as a newcomer runs it from the repository's directory: only
    ``.venv`` (this environment) is there, and nothing of it is on ``PATH``."""
    (cwd / ".venv").symlink_to(Path(sys.executable).parents[1], target_is_directory=True)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    venv_bin = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if p != venv_bin)
    env["COLUMNS"] = "120"
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
    )


OPERATOR_BLOCKS = [b for b in blocks("sh")[2:] if "langgraph dev" not in b]


@pytest.mark.parametrize("script", OPERATOR_BLOCKS, ids=["cli", "http", "retention"])
def test_each_shell_block_runs_as_written_in_a_fresh_shell(script: str, tmp_path: Path) -> None:
    done = _fresh_shell(script, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    if "curl" in script:
        assert '"value":[12.4,55.5,12.7,55.8]' in done.stdout  # the curl of ?turn=1
        assert '"status":"kept"' in done.stdout  # the versions
    elif "prune" in script:
        assert "would remove" in done.stdout and "removed" in done.stdout
    else:
        assert "2 (rewritten)" in done.stdout and "[12.4, 55.5, 12.7, 55.8]" in done.stdout
        assert "exit code 3" in done.stdout
        assert "turn_never_happened: turn 9 never happened" in done.stderr


def test_the_json_block_is_the_example_server_config() -> None:
    (block,) = blocks("json")
    example = json.loads((ROOT / "examples" / "agent_server" / "langgraph.json").read_text())
    assert json.loads(block) == example


def test_the_text_blocks_are_what_the_demo_prints(tmp_path: Path) -> None:
    done = subprocess.run(
        ["mcp-state-versions", "demo", "--db", str(tmp_path / "d.sqlite")],
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(),
    )
    printed = done.stdout
    for block in blocks("text"):
        for line in block.splitlines():
            assert line.rstrip() in printed, line


QUICK_START_ENV = ROOT / ".venv-quick-start"


def _quick_start_env() -> Path:
    """A venv made by exactly the README's first command, without its demo part (rebuilt when
    the command or the project's dependencies change)."""
    import hashlib
    import shutil

    command = blocks("sh")[0].strip().split(" && ")
    install = " && ".join(part for part in command if "demo" not in part)
    install = install.replace(".venv", str(QUICK_START_ENV))
    wanted = hashlib.sha256((install + (ROOT / "pyproject.toml").read_text()).encode()).hexdigest()
    marker = QUICK_START_ENV / "built-from"
    if marker.exists() and marker.read_text() == wanted:
        return QUICK_START_ENV
    shutil.rmtree(QUICK_START_ENV, ignore_errors=True)
    subprocess.run(["bash", "-c", install], cwd=ROOT, check=True, timeout=900)
    marker.write_text(wanted)
    return QUICK_START_ENV


def test_the_quick_start_runs_after_the_first_command(tmp_path: Path) -> None:
    """The quick start, in an environment holding only what the first command installs."""
    quick_start = next(b for b in blocks("python") if "create_agent" in b)
    python = _quick_start_env() / "bin" / "python"
    done = subprocess.run(
        [str(python), "-c", quick_start], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert '"rain"' in done.stdout
