"""The worst case a model can make of ``pattern=``: a 1 MB value and the patterns that make a
backtracking engine take exponential time.

Patterns run on RE2, linear in the text, so the worst case is the size of the value, not the
shape of the pattern. Measured through the synchronous tool (the async one runs the same work
in a worker thread, off the event loop).
"""

from __future__ import annotations

import json
from typing import Any

from mcp_state_versions import make_inspect_state, make_merge_tool_state

from .common import runtime_over, timed_sync

PATTERNS = ["(a+)+$", "(x+x+)+y", "(.*a){12}", "f9999 =", "no such text"]


def measure(repeat: int) -> dict[str, Any]:
    key = "big/value/doc"
    fields = {f"f{i}": "a" * 100 for i in range(10_000)}  # 10,000 lines of about 110 bytes
    tool_state = make_merge_tool_state()({}, {key: {"value": fields}})
    runtime = runtime_over(tool_state)
    tool = make_inspect_state(history=None)
    out: dict[str, Any] = {"value_bytes": len(json.dumps(fields))}
    for pattern in PATTERNS:
        out[pattern] = timed_sync(
            lambda pattern=pattern: tool.func(key=key, pattern=pattern, runtime=runtime), repeat
        )
    out["worst"] = max(out[p]["max"] for p in PATTERNS)
    return out
