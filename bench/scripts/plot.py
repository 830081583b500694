"""Render a pytest-benchmark JSON file as a PNG bar chart: one panel per benchmark group.

Usage::

    pytest bench/test_bench_filter.py --benchmark-only --benchmark-json=filter.json
    python bench/scripts/plot.py filter.json -o docs/bench-filter.png

Each bar is one benchmark, at its median. When a benchmark records how much work one round
did (``benchmark.extra_info["items"]``, or ``"lines"``, ``"urls"``, ``"claims"``), the bar is a
throughput (that unit per second, higher is better); otherwise it is the median time (lower is
better). The whisker spans the interquartile range, and the label gives the value and the ratio
to the slowest bar of the panel. ``extra_info["label"]``, when present, names the bar.
Needs matplotlib (the ``bench`` extra).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

#: extra_info keys that say how much work one benchmark round did, in order of preference.
WORK_KEYS = ("items", "lines", "urls", "claims")


class Bar(NamedTuple):
    label: str
    value: float  # per second, or seconds
    low: float  # interquartile range, same unit
    high: float


class Panel(NamedTuple):
    title: str
    unit: str
    higher_is_better: bool
    bars: List[Bar]


def _work(bench: dict) -> Optional[Tuple[str, float]]:
    """``(unit, amount)`` of work one round did, from ``extra_info``; None when not recorded."""
    extra = bench.get("extra_info") or {}
    for key in WORK_KEYS:
        if isinstance(extra.get(key), (int, float)) and extra[key] > 0:
            return key, float(extra[key])
    return None


def _label(bench: dict) -> str:
    extra = bench.get("extra_info") or {}
    name = str(extra.get("label") or bench["name"])
    return name[len("test_") :] if name.startswith("test_") else name


def panels(report: dict, groups: Optional[Sequence[str]] = None) -> List[Panel]:
    """Turn a pytest-benchmark report into panels, one per group, bars fastest first.

    :param report: the parsed JSON file.
    :param groups: keep only these groups (all when None).
    :raises ValueError: the report holds no benchmarks (or none in the groups asked for).
    """
    by_group: Dict[str, List[dict]] = defaultdict(list)
    for bench in report.get("benchmarks", []):
        group = bench.get("group") or bench.get("fullname", "").split("::")[0] or "benchmarks"
        if groups is None or group in groups:
            by_group[group].append(bench)
    if not by_group:
        wanted = f" in groups {', '.join(groups)}" if groups else ""
        raise ValueError(f"no benchmarks{wanted} in the report")
    result = []
    for group, benches in by_group.items():
        works = [_work(b) for b in benches]
        amounts = [work[1] for work in works if work is not None]
        units = {work[0] for work in works if work is not None}
        # One unit per panel: throughput only when every bar says how much work, in one unit.
        throughput = len(amounts) == len(benches) and len(units) == 1
        bars = []
        for index, bench in enumerate(benches):
            stats = bench["stats"]
            if throughput:
                amount = amounts[index]
                bars.append(Bar(_label(bench), amount / stats["median"], amount / stats["q3"], amount / stats["q1"]))
            else:
                bars.append(Bar(_label(bench), stats["median"], stats["q1"], stats["q3"]))
        unit = f"{units.pop()}/s" if throughput else "seconds"
        bars.sort(key=lambda bar: bar.value, reverse=throughput)
        result.append(Panel(group, unit, throughput, bars))
    return result


def _human(value: float, unit: str) -> str:
    if unit == "seconds":
        for scale, suffix in ((1, "s"), (1e-3, "ms"), (1e-6, "µs")):
            if value >= scale:
                return f"{value / scale:.3g} {suffix}"
        return f"{value / 1e-9:.3g} ns"
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= scale:
            return f"{value / scale:.3g}{suffix} {unit}"
    return f"{value:.3g} {unit}"


def render(report_panels: List[Panel], output: Path, title: Optional[str] = None) -> None:
    """Draw the panels stacked vertically into one PNG file."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display needed
    import matplotlib.pyplot as plt
    from matplotlib.ticker import EngFormatter

    heights = [0.6 + 0.45 * len(p.bars) for p in report_panels]
    fig, axes = plt.subplots(
        len(report_panels), 1, figsize=(9, sum(heights) + 0.6), gridspec_kw={"height_ratios": heights}, squeeze=False
    )
    for ax, panel in zip(axes[:, 0], report_panels):
        labels = [bar.label for bar in panel.bars]
        values = [bar.value for bar in panel.bars]
        errors = [[bar.value - bar.low for bar in panel.bars], [bar.high - bar.value for bar in panel.bars]]
        positions = range(len(panel.bars))
        ax.barh(positions, values, xerr=errors, color="#4878a8", ecolor="#333333", capsize=3)
        ax.set_yticks(list(positions), labels)
        ax.invert_yaxis()
        slowest = min(values) if panel.higher_is_better else max(values)
        for position, bar in zip(positions, panel.bars):
            ratio = bar.value / slowest if panel.higher_is_better else slowest / bar.value
            ax.text(bar.high, position, f"  {_human(bar.value, panel.unit)}  ({ratio:.1f}x)", va="center", fontsize=8)
        ax.set_xlim(0, max(bar.high for bar in panel.bars) * 1.45)
        ax.xaxis.set_major_formatter(EngFormatter(unit="s" if panel.unit == "seconds" else ""))
        better = "higher is better" if panel.higher_is_better else "lower is better"
        ax.set_title(f"{panel.title}  ({panel.unit}, median, {better})", fontsize=10, loc="left")
        ax.tick_params(axis="y", labelsize=8)
        ax.tick_params(axis="x", labelsize=8)
    if title:
        fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    output.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(output, dpi=120)
    plt.close(fig)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description="Render a pytest-benchmark JSON file as a PNG bar chart.")
    parser.add_argument("report", type=Path, help="pytest-benchmark JSON (--benchmark-json or .benchmarks/.../*.json)")
    parser.add_argument("-o", "--output", type=Path, required=True, help="PNG file to write")
    parser.add_argument("--group", action="append", help="only this benchmark group (repeatable)")
    parser.add_argument("--title", help="a title above the panels")
    args = parser.parse_args(argv)
    try:
        report = json.loads(args.report.read_text(encoding="utf-8"))
        render(panels(report, args.group), args.output, args.title)
    except (OSError, ValueError, KeyError) as exc:
        print(f"plot: {args.report}: {exc}", file=sys.stderr)
        return 1
    print(f"plot: wrote {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
