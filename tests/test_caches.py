"""The table of caches in docs/design.md stays true: every cache it names exists, and every
test it names as the cache's check against a fresh read exists."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _rows() -> list[list[str]]:
    design = (ROOT / "docs" / "design.md").read_text()
    section = design.split("\n## Caches\n", 1)[1].split("\n## ", 1)[0]
    return [
        [cell.strip() for cell in line.strip("|").split("|")]
        for line in section.splitlines()
        if line.startswith("| `")
    ]


def test_every_cache_in_the_table_exists_and_names_its_fresh_read_test() -> None:
    rows = _rows()
    assert len(rows) >= 8
    for name_cell, *_, tests_cell in rows:
        for name in re.findall(r"`([\w.]+)`", name_cell):
            module, _, attribute = name.rpartition(".")
            found = importlib.import_module(f"mcp_state_versions.{module}")
            assert hasattr(found, attribute), name
        named = re.findall(r"(?:`([\w/]*test_\w+)\.py)?::(test_\w+)", tests_cell)
        assert named, name_cell
        file = None
        for given, test in named:
            file = given or file
            assert file, tests_cell
            source = (ROOT / "tests" / f"{file}.py").read_text()
            assert re.search(rf"def {test}\(", source), f"{file}.py::{test}"
