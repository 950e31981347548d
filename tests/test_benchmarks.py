"""The benchmark commands the README and docs/benchmarks.md name exist, with the flags they
are given there (the figures themselves are measured by running them, not by tests)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", ROOT / "docs" / "benchmarks.md"]
COMMAND = re.compile(r"`python\s+-m\s+(benchmarks(?:\.\w+)?)((?:\s+--?[\w-]+(?:\s+[\w,]+)?)*)`")


def _documented() -> dict[str, set[str]]:
    """Each benchmark module named in the docs, with the flags it is shown with; a paragraph
    naming one module and ``--quick`` gives it ``--quick`` too."""
    found: dict[str, set[str]] = {}
    for doc in DOCS:
        for paragraph in doc.read_text().split("\n\n"):
            commands = COMMAND.findall(paragraph)
            for module, flags in commands:
                found.setdefault(module, set()).update(re.findall(r"--?[\w-]+", flags))
            modules = {module for module, _ in commands}
            if "`--quick`" in paragraph and len(modules) == 1:
                found[modules.pop()].add("--quick")
    return found


@pytest.mark.parametrize("module", sorted(_documented()))
def test_a_documented_benchmark_takes_its_documented_flags(module: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", module, "--help"], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    for flag in _documented()[module]:
        assert re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", done.stdout), (module, flag)
