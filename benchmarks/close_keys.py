"""A mistyped key's answer at thousands of long keys: the "Did you mean ...?" search.

A model or an HTTP caller chooses the key it asks for; an unknown key is answered with the close
matches among the keys in state, on the event loop. Measured through the ``inspect_state`` tool
(the whole answer, as the model gets it) on 500 and 5,000 keys of 167 characters, beside the
``difflib`` search the library used before (on the same keys, the close-match step alone).

    python -m benchmarks.close_keys [--quick]
"""

from __future__ import annotations

import difflib
import random
import string
from typing import Any

from mcp_state_versions import make_inspect_state, make_merge_tool_state

from .common import quick_repeats, runtime_over, timed_sync

KEY_LENGTH = 167
TARGET_MS = 50.0
"""No answer to a caller's input may hold the event loop longer than this (issue target)."""


def _keys(count: int) -> list[str]:
    chosen = random.Random(count)
    alphabet = string.ascii_lowercase + "_"
    return [
        f"t{i % 7}/tool/" + "".join(chosen.choice(alphabet) for _ in range(KEY_LENGTH - 12))
        for i in range(count)
    ]


def measure(repeat: int, counts: tuple[int, ...] = (500, 5000)) -> dict[str, Any]:
    tool = make_inspect_state(history=None)
    out: dict[str, Any] = {"key_length": KEY_LENGTH, "target_ms": TARGET_MS}
    for count in counts:
        keys = _keys(count)
        tool_state = make_merge_tool_state()({}, {key: {"value": 1} for key in keys})
        runtime = runtime_over(tool_state)
        asked = keys[count // 2][:-4] + "zzzz"  # a typo of a key in state
        answer = tool.func(key=asked, runtime=runtime)
        assert keys[count // 2] in answer, answer[:200]
        out[str(count)] = {
            "answer_ms": timed_sync(lambda: tool.func(key=asked, runtime=runtime), repeat),
            "difflib_ms": timed_sync(
                lambda: difflib.get_close_matches(asked, keys, n=3, cutoff=0.5), min(repeat, 3)
            ),
        }
    return out


def table(figures: dict[str, Any]) -> str:
    rows = [
        f"| keys ({figures['key_length']} characters) | unknown-key answer (median, max) "
        "| difflib's search alone (median) |",
        "| ---: | ---: | ---: |",
    ]
    for count, cell in figures.items():
        if not count.isdigit():
            continue
        answer, old = cell["answer_ms"], cell["difflib_ms"]
        rows.append(
            f"| {int(count):,} | {answer['median']:.1f} ms, {answer['max']:.1f} ms "
            f"| {old['median']:,.0f} ms |"
        )
    return "\n".join(rows)


def main() -> None:
    figures = measure(quick_repeats("python -m benchmarks.close_keys", 21))
    print(table(figures))
    worst = max(cell["answer_ms"]["max"] for k, cell in figures.items() if k.isdigit())
    print(f"\nworst answer {worst:.1f} ms (target ≤ {TARGET_MS:.0f} ms)")


if __name__ == "__main__":
    main()
