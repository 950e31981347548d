"""The report: Markdown tables (with each target, met or not) and a plot, from one run's JSON."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from .common import progress

READS = ("turn 1", "turn T/2", "turn T-3")
COLORS = {"memory": "tab:blue", "sqlite": "tab:green", "postgres": "tab:red"}


def _ms(m: dict[str, float] | None) -> str:
    if not m:
        return "—"
    return f"{m['median']:,.2f} ({m['min']:,.2f}–{m['max']:,.2f})"


def _x(value: float) -> str:
    return f"{value:,.0f}×" if value >= 100 else f"{value:.2f}×"


def _ratio_cell(r: dict[str, float]) -> str:
    return f"{r['median']:.2f}× ({r['min']:.2f}–{r['max']:.2f})"


def _rebuilt(rebuild: dict[str, float] | None) -> str:
    if not rebuild:
        return "–"
    return f"{rebuild['writes']:,}: {rebuild['read_ms']:.1f} + {rebuild['replay_ms']:.1f}"


def _pair(ms: dict[str, float], first: str, second: str) -> str:
    if first not in ms or second not in ms:
        return "—"
    return f"{ms[first]:.1f} / {ms[second]:.1f}"


def _ratio_or_dash(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}×"


def _cell(cell: str) -> str:
    keys, size = cell.split("x")
    size_ = int(size)
    return f"{keys} × {size_ // 1000} KB" if size_ >= 1000 else f"{keys} × {size_} B"


def targets(figures: dict[str, Any]) -> list[tuple[str, str, bool]]:
    """Each target with the measured figure and whether it was met."""
    rows: list[tuple[str, str, bool]] = []
    reads = figures.get("reads", {})
    top = max((int(n) for by in reads.values() for n in by), default=0)
    for backend in ("postgres", "sqlite"):
        at = reads.get(backend, {}).get(str(top))
        if not at:
            continue
        for label in READS:
            r = at[label]["walk"]["median"] / at[label]["limit"]["median"]
            rows.append(
                (f"{backend}, {top} turns, {label}: walk ÷ limit ≤ 1.5", f"{r:.2f}×", r <= 1.5)
            )
    for backend, by_length in reads.items():
        at = by_length.get("500")
        if not at:
            continue
        for label in READS:
            if "baseline" not in at[label]:
                continue
            r = at[label]["baseline"]["median"] / at[label]["walk"]["median"]
            rows.append(
                (f"{backend}, 500 turns, {label}: full walk ÷ walk ≥ 5,000", _x(r), r >= 5000)
            )
    for backend, memory in figures.get("memory", {}).items():
        walk = memory.get("walk")
        if walk:
            rows.append(
                (
                    f"{backend}, {memory['walk_turns']} turns: peak memory of a walk read ≤ 10 MB",
                    f"+{walk['rise_mb']:.1f} MB",
                    walk["rise_mb"] <= 10,
                )
            )
    for backend, cells in figures.get("writes", {}).items():
        for cell, row in cells.items():
            r = row["ratio_stored"]
            rows.append((f"{backend}, {_cell(cell)}: stored ÷ changed ≤ 2", f"{r:.2f}×", r <= 2))
            r = row["ratio_time_lww"]
            rows.append(
                (f"{backend}, {_cell(cell)}: time ÷ plain agent ≤ 1.2", f"{r:.2f}×", r <= 1.2)
            )
            r = row.get("ratio_time_create_agent")
            if r is not None:  # runs before the create_agent path was measured have none
                rows.append(
                    (
                        f"{backend}, {_cell(cell)}: middleware ÷ plain create_agent ≤ 1.2",
                        f"{r:.2f}×",
                        r <= 1.2,
                    )
                )
    large = figures.get("large_value")
    if large:
        r = large["ratio_growth"]
        rows.append(
            ("sqlite, one 5 MB value: file growth per turn ≤ 2× the value", f"{r:.2f}×", r <= 2)
        )
        m = large["ms_per_turn"]
        rows.append(("sqlite, one 5 MB value: a turn ≤ 1 s", f"{m:,.0f} ms", m <= 1000))
        m = large["history_read_ms"]
        rows.append(("sqlite, one 5 MB value: history read ≤ 0.5 s", f"{m:,.0f} ms", m <= 500))
    if "listing_chars" in figures:
        n = figures["listing_chars"]
        rows.append(("first listing of 5,000 keys ≤ 4,000 characters", f"{n:,}", n <= 4000))
    tool = figures.get("tool")
    if tool:
        r = tool["ring read ÷ floor"]["median"]
        rows.append(("ring read through ToolNode ÷ cheapest tool ≤ 1.5", f"{r:.2f}×", r <= 1.5))
        r = tool["listing ÷ plain"]["median"]
        rows.append(("listing with markers ÷ plain listing ≤ 1.05", f"{r:.2f}×", r <= 1.05))
    page = figures.get("page")
    if page:
        from .page import TARGETS

        size = f"page, {page['turns']:,} turns × {page['keys']} keys"
        s = page["ready_s"]
        rows.append(
            (
                f"{size}: grid drawn ≤ {TARGETS['ready_s']:g} s",
                f"{s:.2f} s",
                s <= TARGETS["ready_s"],
            )
        )
        m = page["move_ms"]
        rows.append(
            (
                f"{size}: keyboard move ≤ {TARGETS['move_ms']:g} ms",
                f"{m:.1f} ms",
                m <= TARGETS["move_ms"],
            )
        )
        s = page["detail_s"]
        rows.append(
            (
                f"{size}: value and diff ≤ {TARGETS['detail_s']:g} s",
                f"{s:.2f} s",
                s <= TARGETS["detail_s"],
            )
        )
    return rows


def table(figures: dict[str, Any]) -> str:
    lines = [f"Machine: {figures['machine']}. Command: `{figures['command']}`", ""]
    lines += ["## Targets", "", "| target | measured | met |", "| --- | ---: | :---: |"]
    lines += [
        f"| {name} | {value} | {'yes' if met else '**no**'} |"
        for name, value, met in targets(figures)
    ]
    lines += [
        "",
        "## Turn reads (median ms, min–max)",
        "",
        "| backend | turns | read | ring | library walk | physical limit | full history walk | walk ÷ limit | full ÷ walk |",
        "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for backend, by_length in figures.get("reads", {}).items():
        for length, row in sorted(by_length.items(), key=lambda kv: int(kv[0])):
            for label in READS:
                r = row[label]
                base = r.get("baseline")
                walk = r["walk"]["median"]
                lines.append(
                    f"| {backend} | {length} | {label} | {_ms(r['ring'])} | {_ms(r['walk'])} | "
                    f"{_ms(r['limit'])} | {_ms(base)} | {walk / r['limit']['median']:.2f}× | "
                    f"{_x(base['median'] / walk) if base else '—'} |"
                )
    lines += ["", "## Scaling of a turn-1 read (k in cost ∝ turns^k)", ""]
    lines += [
        "| backend | walk | physical limit | full history walk |",
        "| --- | ---: | ---: | ---: |",
    ]
    for backend, by_length in figures.get("reads", {}).items():
        lengths = sorted(int(n) for n in by_length)
        if len(lengths) < 2:
            continue
        cells = []
        for method in ("walk", "limit", "baseline"):
            points = [(n, by_length[str(n)]["turn 1"].get(method)) for n in lengths]
            points = [(n, m["median"]) for n, m in points if m]
            if len(points) < 2:
                cells.append("—")
                continue
            (n0, c0), (n1, c1) = points[0], points[-1]
            cells.append(f"{math.log(c1 / c0) / math.log(n1 / n0):.2f}")
        lines.append(f"| {backend} | " + " | ".join(cells) + " |")
    memory = figures.get("memory", {})
    if memory:
        lines += ["", "## Peak memory of one read of turn 1, in a fresh process", ""]
        lines += ["| backend | library walk | full history walk |", "| --- | ---: | ---: |"]
        for backend, m in memory.items():
            walk = (
                f"+{m['walk']['rise_mb']:.1f} MB ({m['walk_turns']} turns)"
                if m.get("walk")
                else "—"
            )
            base = (
                f"+{m['baseline']['rise_mb']:,.1f} MB ({m['baseline_turns']} turns)"
                if m.get("baseline")
                else "—"
            )
            lines.append(f"| {backend} | {walk} | {base} |")
    tool = figures.get("tool")
    if tool:
        lines += [
            "",
            "## The tool's fixed cost, through a one-node ToolNode graph (median ms)",
            "",
            "| call | inspect_state | floor | ratio |",
            "| --- | ---: | ---: | ---: |",
            f"| ring read (turn=18) | {_ms(tool['ring read'])} | {_ms(tool['floor'])} | {_ratio_cell(tool['ring read ÷ floor'])} |",
            f'| key="*", 40 keys | {_ms(tool["listing"])} | {_ms(tool["plain listing"])} (no markers) | {_ratio_cell(tool["listing ÷ plain"])} |',
        ]
        if "call, ToolRuntime" in tool:
            lines += [
                "",
                "A tool's `runtime` argument, one call in a 1,000-turn thread (median ms): "
                f"`ToolRuntime` {_ms(tool['call, ToolRuntime'])}, `LeanToolRuntime` "
                f"{_ms(tool['call, LeanToolRuntime'])} "
                f"({_ratio_cell(tool['ToolRuntime ÷ LeanToolRuntime'])}).",
            ]
    reducer = figures.get("reducer")
    if reducer:
        lines += [
            "",
            "## Reducer, one write (median µs)",
            "",
            "| keys | library | `{**current, **update}` | ratio |",
            "| ---: | ---: | ---: | ---: |",
        ]
        for keys in ("10", "100", "1000", "5000"):
            row = reducer[keys]
            lines.append(
                f"| {int(keys):,} | {_ms(row['library'])} | {_ms(row['dict merge'])} | {_ratio_cell(row['ratio'])} |"
            )
        lines.append(
            f"\nFitted exponent k (cost ∝ keys^k): library {reducer['k library']:.2f}, "
            f"dict merge {reducer['k dict merge']:.2f}."
        )
    pattern = figures.get("pattern")
    if pattern:
        lines += [
            "",
            f"## pattern= on a {pattern['value_bytes']:,}-byte value (median ms, min–max)",
            "",
            "| pattern | time |",
            "| --- | ---: |",
        ]
        for name, m in pattern.items():
            if isinstance(m, dict):
                lines.append(f"| `{name}` | {_ms(m)} |")
        lines.append(f"\nWorst single run: {pattern['worst']:.1f} ms.")
    writes_ = figures.get("writes")
    if writes_:
        lines += [
            "",
            f"## Writes ({figures['writes_turns']} turns after one publishing every key; two values change a turn)",
            "",
            "tool_state bytes stored per turn ÷ the JSON bytes of the values that changed (the "
            "library's over one whole snapshot cycle as its thread took it: its writes and the "
            "snapshot that ended the cycle, over the turns between its snapshots), median ms per "
            "turn over the measured turns, and what rebuilding tool_state costs at the run start "
            "furthest from a snapshot (the one that took the cycle's snapshot; the saver's read "
            "and the replay of the writes since the last snapshot, in a process that remembers no "
            "earlier replay).",
            "",
            "| backend | keys × bytes | library stored ÷ changed | turns between snapshots | plain agent stored ÷ changed | library ms | plain agent ms | no tool_state ms | time ÷ plain | middleware / plain create_agent ms | middleware ÷ plain create_agent | run-start load, library / plain ms | furthest run start: writes replayed, read + replay ms |",
            "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for backend, cells in writes_.items():
            for cell, row in cells.items():
                ms = row["ms_per_turn"]
                load = row["load_ms"]
                lines.append(
                    f"| {backend} | {_cell(cell)} | {row['ratio_stored']:.2f}× | "
                    f"{row['turns_between_snapshots']} | {_x(row['ratio_stored_lww'])} | {ms['library']:.1f} | "
                    f"{ms['last-write-wins']:.1f} | {ms['no tool_state']:.1f} | "
                    f"{row['ratio_time_lww']:.2f}× | {_pair(ms, 'middleware', 'plain create_agent')} | "
                    f"{_ratio_or_dash(row.get('ratio_time_create_agent'))} | "
                    f"{load['library']:.1f} / {load['last-write-wins']:.1f} | "
                    f"{_rebuilt(row.get('rebuild'))} |"
                )
    large = figures.get("large_value")
    if large:
        lines += [
            "",
            f"## One {large['value_bytes']:,}-byte value rewritten {large['turns']} times (SQLite)",
            "",
            f"File growth per turn {large['file_growth_per_turn']:,.0f} bytes "
            f"({large['ratio_growth']:.2f}× the value); {large['ms_per_turn']:,.0f} ms a turn; "
            f"a history read of turn 1 {large['history_read_ms']:,.0f} ms.",
        ]
    found = figures.get("sweep")
    if found:
        from .sweep import table as sweep_table

        threads = next(iter(found.values()))["threads"]
        lines += [
            "",
            f"## A sweep over {threads:,} threads (half idle, deleted; half pruned to 2 turns)",
            "",
            *sweep_table(found),
        ]
    found = figures.get("page")
    if found:
        from .page import table as page_table

        lines += ["", "## The timeline page (Debian's chromium, through Playwright)", ""]
        lines += page_table(found)
    return "\n".join(lines)


def plot(figures: dict[str, Any], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        progress("matplotlib not installed (pip install -e '.[bench]'): no plot")
        return False
    fig, axes = plt.subplots(1, 3, figsize=(16, 5), sharey=True)
    for ax, label in zip(axes, READS, strict=True):
        for backend, by_length in figures.get("reads", {}).items():
            lengths = sorted(int(n) for n in by_length)
            for method, style in (("walk", "-"), ("limit", "--"), ("baseline", ":")):
                points = [
                    (n, by_length[str(n)][label][method]["median"])
                    for n in lengths
                    if by_length[str(n)][label].get(method)
                ]
                if points:
                    ax.plot(
                        *zip(*points, strict=True),
                        style,
                        marker="o",
                        color=COLORS.get(backend),
                        label=f"{method} · {backend}",
                    )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("conversation length (turns)")
        ax.set_title(f"read of {label}")
        ax.grid(True, which="major", alpha=0.3)
    axes[0].set_ylabel("median latency (ms)")
    axes[-1].legend(fontsize=7)
    fig.suptitle(
        "inspect_state(key, turn=N) beyond the ring: library walk vs physical limit vs full history walk"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def plot_writes(figures: dict[str, Any], path: Path) -> bool:
    """Stored ÷ changed bytes and time ÷ the plain agent, per cell and backend, with targets."""
    writes_ = figures.get("writes")
    if not writes_:
        return False
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    cells = list(next(iter(writes_.values())))
    fig, axes = plt.subplots(1, 2, figsize=(16, 5))
    width = 0.8 / len(writes_)
    for ax, (field, target, title) in zip(
        axes,
        (
            ("ratio_stored", 2.0, "tool_state bytes stored per turn ÷ bytes changed"),
            ("ratio_time_lww", 1.2, "time per turn ÷ a plain agent (dict channel)"),
        ),
        strict=True,
    ):
        for i, (backend, by_cell) in enumerate(writes_.items()):
            ax.bar(
                [c + i * width for c in range(len(cells))],
                [by_cell[cell][field] for cell in cells],
                width,
                color=COLORS.get(backend),
                label=backend,
            )
        ax.axhline(target, color="black", linestyle="--", linewidth=1, label=f"target ≤ {target}")
        ax.set_xticks(
            [c + width for c in range(len(cells))], [_cell(c) for c in cells], rotation=30
        )
        ax.set_title(title)
        ax.grid(True, axis="y", alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(
        f"What a turn stores and costs ({figures['writes_turns']} turns, two values changed a turn)"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def plot_thread(found: dict[str, Any], path: Path, target_ratio: float = 3.0) -> bool:
    """The whole thread against its length: bytes stored ÷ bytes added, and a turn's time by
    window, for every agent on every backend, with the targets (stored ≤ 3× added; the last
    window ≤ 1.3× the first, drawn for the library)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, axes = plt.subplots(1, 2, figsize=(15, 5.5))
    styles = {"sqlite": "-", "postgres": "--"}
    names = list(dict.fromkeys(name for agents in found.values() for name in agents))
    colors = {name: f"C{index}" for index, name in enumerate(names)}  # one colour an agent
    for backend, agents in found.items():
        for name, figures in agents.items():
            sizes = sorted((int(n), s["stored"] / s["added"]) for n, s in figures["sizes"].items())
            label = f"{name} ({backend})"
            style = {"linestyle": styles.get(backend, ":"), "color": colors[name], "marker": "o"}
            axes[0].plot(*zip(*sizes, strict=True), label=label, **style)
            windows = [(int(w.split("-")[1]), ms) for w, ms in figures["turn_ms"].items()]
            if windows:
                axes[1].plot(*zip(*windows, strict=True), label=label, **style)
            if name == "library" and windows:
                axes[1].axhline(1.3 * windows[0][1], color="grey", linestyle=":", linewidth=1)
    axes[0].axhline(target_ratio, color="red", linestyle=":", label=f"target ≤ {target_ratio:g}×")
    axes[0].set(
        xscale="log", yscale="log", xlabel="turns", ylabel="bytes stored ÷ bytes the turns added"
    )
    axes[0].set_title("storage against the thread's length")
    axes[1].set(xscale="log", yscale="log", xlabel="turn (window end)", ylabel="median ms a turn")
    axes[1].set_title(
        "a turn's time against the thread's length (dotted: 1.3× the library's first)"
    )
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True
