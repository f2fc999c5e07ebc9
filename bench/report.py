"""The report: ``RESULTS.md`` (machine, targets, each section) and ``results.png`` (every
section's charts, one subplot each)."""

from __future__ import annotations

import datetime
import math
import os
from collections.abc import Sequence
from pathlib import Path

from bench.common import Chart, Context, Section, Target, machine_facts, markdown_table

RESULTS = "RESULTS.md"
CHART = "results.png"


def met_text(met: bool | None) -> str:
    return "n/a" if met is None else ("met" if met else "**missed**")


def targets_table(targets: Sequence[tuple[str, Target]]) -> str:
    """The targets of every section: ``(section title, target)`` rows."""
    rows = [[title, t.name, t.measured, t.target, met_text(t.met)] for title, t in targets]
    return markdown_table(["section", "target", "measured", "wanted", "met"], rows)


def markdown(ctx: Context, sections: Sequence[tuple[str, Section]]) -> str:
    """The whole ``RESULTS.md``; each section is preceded by ``<!-- module: NAME -->``."""
    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "# Benchmark results",
        "",
        f"Written by `python -m bench` on {when}. The chart: [{CHART}]({CHART}).",
        "",
    ]
    lines += [f"- **{key}**: {value}" for key, value in machine_facts(ctx).items()]
    if hasattr(os, "getloadavg"):
        load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
        lines.append(
            f"- **Load average** (1, 5, 15 min) as the report was written: {load} "
            "(anything above the benchmark's own load is other work sharing the CPUs)"
        )
    targets = [(section.title, t) for _, section in sections for t in section.targets]
    lines += ["", "## Targets", ""]
    if targets:
        met = sum(1 for _, t in targets if t.met)
        missed = sum(1 for _, t in targets if t.met is False)
        lines += [f"{met} met, {missed} missed.", "", targets_table(targets)]
    else:
        lines.append("No section reported a target.")
    for name, section in sections:
        lines += ["", f"<!-- module: {name} -->", f"## {section.title}", "", section.markdown]
    return "\n".join(lines).rstrip() + "\n"


def draw(charts: Sequence[Chart], path: Path) -> None:
    """One horizontal bar subplot per chart, each bar labelled with its value."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not charts:
        figure, axis = plt.subplots(figsize=(8, 1.5))
        axis.axis("off")
        axis.text(0.5, 0.5, "No charts in this run.", ha="center", va="center")
        figure.savefig(path, dpi=100)
        plt.close(figure)
        return
    heights = [1.2 + 0.32 * max(1, len(chart.bars)) for chart in charts]
    figure, axes = plt.subplots(
        len(charts),
        1,
        figsize=(10, sum(heights)),
        gridspec_kw={"height_ratios": heights},
        squeeze=False,
    )
    for axis, chart in zip(axes[:, 0], charts, strict=True):
        labels = [label for label, _ in chart.bars]
        values = [value for _, value in chart.bars]
        positions = range(len(values))
        axis.barh(positions, values, color="#4C72B0")
        axis.set_yticks(list(positions), labels, fontsize=8)
        axis.invert_yaxis()
        axis.set_title(chart.title, fontsize=10)
        axis.set_xlabel(chart.unit, fontsize=8)
        top = max((v for v in values if math.isfinite(v)), default=0.0)
        axis.set_xlim(min(0.0, *values) if values else 0.0, top * 1.18 if top > 0 else 1.0)
        for position, value in zip(positions, values, strict=True):
            axis.text(value, position, f" {_number(value)}", va="center", fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def _number(value: float) -> str:
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def write(ctx: Context, sections: Sequence[tuple[str, Section]], out: Path) -> list[Path]:
    """Write ``RESULTS.md`` and ``results.png`` into ``out``; their paths."""
    results, chart = out / RESULTS, out / CHART
    results.write_text(markdown(ctx, sections))
    draw([c for _, section in sections for c in section.charts], chart)
    return [results, chart]
