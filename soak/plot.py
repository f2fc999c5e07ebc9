"""The soak's picture: per topology, admitted, denied, fail-mode and failed requests per
second, with each fault shaded and named (matplotlib's Agg backend, as ``bench`` uses)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from soak.verdict import Result, active, kind_of

#: What each line counts, and its colour.
LINES = {
    "admitted": (("admitted",), "#2ca02c"),
    "denied (429)": (("denied",), "#ff7f0e"),
    "fail mode": (("admitted (fail mode)", "denied (fail mode)"), "#7f7f7f"),
    "errors (5xx, unanswered)": (("5xx", "unanswered", "other"), "#d62728"),
}


def draw(results: Sequence[Result], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(
        len(results), 1, figsize=(11, 2.8 * len(results)), squeeze=False, sharex=False
    )
    for axis, result in zip(axes[:, 0], results, strict=True):
        started = result.meta.started
        seconds = int(result.meta.stopped - started) + 1
        per_second: dict[str, Counter[int]] = {label: Counter() for label in LINES}
        for record in result.records:
            kind = kind_of(record)
            for label, (kinds, _) in LINES.items():
                if kind in kinds:
                    per_second[label][int(record.send - started)] += 1
        xs = list(range(seconds))
        for label, (_, colour) in LINES.items():
            ys = [per_second[label][x] for x in xs]
            axis.plot(xs, ys, label=label, color=colour, linewidth=1)
        top = axis.get_ylim()[1]
        for fault in active(result.faults):
            start = fault.start - started
            axis.axvspan(start, max(fault.end - started, start + 0.5), color="#1f77b4", alpha=0.15)
            axis.text(start, top * 0.98, f" {fault.kind}", rotation=90, va="top", fontsize=7)
        axis.set_title(f"{result.meta.topology}: requests per second", fontsize=10)
        axis.set_xlim(0, seconds)
        axis.set_xlabel("seconds since the load started", fontsize=8)
        axis.tick_params(labelsize=8)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="lower center", ncol=len(LINES), fontsize=8)
    figure.tight_layout(rect=(0, 0.04, 1, 1))
    figure.savefig(path, dpi=100)
    plt.close(figure)
