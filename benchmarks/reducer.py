"""The reducer's cost per write against a plain dict merge, by number of keys.

Each write goes into a ``tool_state`` of N keys (10, 100, 1,000, 5,000), each key with two
versions, through the library's reducer and through ``{**current, **update}``. Both copy the
dict (a reducer must not mutate its input), so both grow with N; what the library adds on top
must not: the fitted exponent k in cost ∝ N^k says whether it does.
"""

from __future__ import annotations

import math
from typing import Any

from mcp_state_versions import CLOCK_KEY, make_merge_tool_state

from .common import ratio, timed_sync

KEYS = (10, 100, 1000, 5000)


def _dict_merge(current: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    return {**current, **update}


def _fit(points: list[tuple[int, float]]) -> float:
    """Least-squares slope of log(cost) against log(keys)."""
    xs = [math.log(n) for n, _ in points]
    ys = [math.log(c) for _, c in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum(
        (x - mx) ** 2 for x in xs
    )


def measure(repeat: int) -> dict[str, Any]:
    reducer = make_merge_tool_state()
    out: dict[str, Any] = {}
    for keys in KEYS:
        state = reducer({}, {CLOCK_KEY: {"turn": 1, "open": True, "message": "m1"}})
        state = reducer(state, {f"k{i}": {"value": [i, 1]} for i in range(keys)})
        state = reducer(state, {CLOCK_KEY: {"turn": 2, "open": True, "message": "m2"}})
        state = reducer(state, {f"k{i}": {"value": [i, 2]} for i in range(keys)})
        plain = {k: e.get("value") for k, e in state.items()}
        writes = iter(range(10**9))
        library = timed_sync(
            lambda: reducer(state, {"k0": {"value": [next(writes), 3]}}), repeat * 40, unit=1e6
        )
        merge = timed_sync(
            lambda: _dict_merge(plain, {"k0": [next(writes), 3]}), repeat * 40, unit=1e6
        )
        out[str(keys)] = {"library": library, "dict merge": merge, "ratio": ratio(library, merge)}
    for method in ("library", "dict merge"):
        out[f"k {method}"] = _fit([(n, out[str(n)][method]["median"]) for n in KEYS])
    return out
