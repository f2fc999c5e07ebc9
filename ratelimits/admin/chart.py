"""Inline SVG charts of :func:`ratelimits.tools.stats_reading.series`, for the admin dashboard.

Pure functions, no I/O, no JavaScript, nothing fetched: the SVG goes straight into the
page. :func:`render_svg` draws one policy (a line per outcome, one point per minute);
:func:`render_all` draws every policy of a series, one chart each.

Accessibility: the ``<svg>`` is ``role="img"``, named by its ``<title>`` and described
by a ``<desc>`` with the totals; each minute has a ``<title>`` (a tooltip on hover) with
that minute's numbers. The lines are told apart by colour *and* dash pattern, from the
Okabe-Ito palette (readable with the common colour-vision deficiencies): allowed in solid
blue, denied in dashed orange, shadow-denied in dotted grey, and, only when some
allowed request took a client near its limit, near-limit in dash-dot-dotted green, and
only when Redis was unavailable at some minute, failed (open or closed) in dash-dotted
purple. Axes and text use ``currentColor``, so they follow the page's text colour
(light and dark admin).
Every text is escaped with :func:`django.utils.html.escape`; the result is a
``SafeString``, ready for a template without ``|safe``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from ratelimits.tools.stats_reading import Series


@dataclass(frozen=True, slots=True)
class Line:
    key: str
    label: str
    colour: str
    dash: str  # stroke-dasharray; "" for solid


LINES = (
    Line("allowed", "allowed", "#0072B2", ""),
    Line("denied", "denied", "#D55E00", "6 3"),
    Line("shadow_denied", "shadow-denied", "#767676", "2 3"),
)
NEAR = Line("near_limit", "near limit", "#009E73", "4 2 1 2 1 2")
FAILED = Line("failed", "Redis unavailable", "#CC79A7", "8 3 2 3")

MARGIN_LEFT = 52
MARGIN_RIGHT = 14
MARGIN_TOP = 30
MARGIN_BOTTOM = 38
FONT_SIZE = 11
CHAR_WIDTH = 6.2  # rough width of one character at FONT_SIZE, for laying out the legend


def render_all(series: Series, *, width: int = 640, height: int = 220) -> dict[str, SafeString]:
    """``{policy: svg}`` for every policy in ``series``, by name."""
    return {
        policy: render_svg(series, policy, width=width, height=height) for policy in series.policies
    }


def render_svg(series: Series, policy: str, *, width: int = 640, height: int = 220) -> SafeString:
    """One policy's requests per minute over ``series.minutes`` as a self-contained SVG.

    ``policy`` need not be in ``series``: a policy without traffic gets a chart of zeros.
    ``width`` and ``height`` are the SVG's size in pixels (the drawing scales with them).
    """
    n = len(series.minutes)
    if n == 0:
        raise ValueError("the series has no minutes to draw")
    row = series.of(policy)
    lines = [(line, list(row.get(line.key, [0] * n))) for line in LINES]
    near = list(row.get(NEAR.key, ()))
    if any(near):
        lines.append((NEAR, near))
    failed = [
        a + b
        for a, b in zip(
            row.get("failed_open", [0] * n), row.get("failed_closed", [0] * n), strict=True
        )
    ]
    if any(failed):
        lines.append((FAILED, failed))

    x0, x1 = MARGIN_LEFT, width - MARGIN_RIGHT
    y0, y1 = MARGIN_TOP, height - MARGIN_BOTTOM
    top, step = y_scale(max((max(values, default=0) for _, values in lines), default=0))

    def x(i: int) -> float:
        return x0 + (x1 - x0) * (i / (n - 1) if n > 1 else 0.5)

    def y(value: float) -> float:
        return y1 - (y1 - y0) * value / top

    uid = "rlc-" + hashlib.sha256(policy.encode()).hexdigest()[:12]
    name = escape(policy)
    totals = {line.key: sum(values) for line, values in lines}
    summary = ", ".join(f"{totals[line.key]:,} {escape(line.label)}" for line, _ in lines)
    out: list[str] = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-labelledby="{uid}-t {uid}-d" '
        f'class="ratelimits-chart" data-policy="{name}" '
        f'font-family="sans-serif" font-size="{FONT_SIZE}">',
        f'<title id="{uid}-t">Requests per minute for policy {name}, '
        f"last {n} minute{'s' if n != 1 else ''}</title>",
        f'<desc id="{uid}-d">Totals: {summary}.</desc>',
    ]

    out.extend(y_axis((x0, y0, x1, y1), top, step, y))
    out.append('<g class="x-ticks" fill="currentColor" text-anchor="middle">')
    every = _x_step(n)
    for ago in range(0, n, every):
        i = n - 1 - ago
        label = "now" if ago == 0 else str(ago)
        out.append(f'<text x="{num(x(i))}" y="{y1 + 15}">{escape(label)}</text>')
    out.append("</g>")
    out.append(
        f'<text class="x-title" fill="currentColor" text-anchor="middle" '
        f'x="{num((x0 + x1) / 2)}" y="{height - 6}">minutes ago</text>'
    )
    out.append(
        f'<text class="y-title" fill="currentColor" text-anchor="middle" '
        f'transform="translate(12 {num((y0 + y1) / 2)}) rotate(-90)">requests / min</text>'
    )

    # One line per outcome, one point per minute.
    out.append('<g class="series" fill="none" stroke-width="2" stroke-linejoin="round">')
    for line, values in lines:
        points = " ".join(f"{num(x(i))},{num(y(v))}" for i, v in enumerate(values))
        dash = f' stroke-dasharray="{line.dash}"' if line.dash else ""
        out.append(
            f'<polyline class="line" data-outcome="{line.key}" stroke="{line.colour}"{dash} '
            f'points="{points}"><title>{escape(line.label)}: {totals[line.key]:,} in all'
            f"</title></polyline>"
        )
    out.append("</g>")

    # The legend, in one row above the plot.
    out.append('<g class="legend" fill="currentColor">')
    lx = float(x0)
    for line, _ in lines:
        dash = f' stroke-dasharray="{line.dash}"' if line.dash else ""
        text = f"{line.label} ({totals[line.key]:,})"
        out.append(
            f'<line x1="{num(lx)}" y1="12" x2="{num(lx + 22)}" y2="12" stroke="{line.colour}" '
            f'stroke-width="2"{dash}/>'
            f'<text x="{num(lx + 27)}" y="16">{escape(text)}</text>'
        )
        lx += 27 + len(text) * CHAR_WIDTH + 14
    out.append("</g>")

    # A hover target per minute, its title giving that minute's numbers.
    out.append('<g class="minutes" fill="#000" fill-opacity="0">')
    column = (x1 - x0) / n
    for i in range(n):
        ago = n - 1 - i
        when = "this minute" if ago == 0 else f"{ago} min ago"
        numbers = ", ".join(f"{values[i]:,} {line.label}" for line, values in lines)
        left = max(float(x0), x(i) - column / 2)
        right = min(float(x1), x(i) + column / 2)
        out.append(
            f'<rect x="{num(left)}" y="{y0}" width="{num(right - left)}" height="{y1 - y0}">'
            f"<title>{escape(f'{when}: {numbers}')}</title></rect>"
        )
    out.append("</g>")
    out.append("</svg>")
    return mark_safe("".join(out))  # every text above is escaped


def y_axis(
    box: tuple[float, float, float, float], top: int, step: int, y: Callable[[float], float]
) -> list[str]:
    r"""A chart's grid lines, its two axes and its y-axis labels, from 0 to ``top`` in
    ``step``\ s, in ``box`` (``x0, y0, x1, y1``), ``y`` placing a value."""
    x0, y0, x1, y1 = box
    out = ['<g class="grid" stroke="currentColor" stroke-opacity="0.15">']
    for value in range(step, top + 1, step):
        out.append(f'<line x1="{x0}" y1="{num(y(value))}" x2="{x1}" y2="{num(y(value))}"/>')
    out.append("</g>")
    out.append(
        f'<g class="axes" stroke="currentColor" stroke-opacity="0.6">'
        f'<line x1="{x0}" y1="{y1}" x2="{x1}" y2="{y1}"/>'
        f'<line x1="{x0}" y1="{y0}" x2="{x0}" y2="{y1}"/></g>'
    )
    out.append('<g class="y-ticks" fill="currentColor" text-anchor="end">')
    for value in range(0, top + 1, step):
        out.append(f'<text x="{x0 - 6}" y="{num(y(value) + 4)}">{escape(f"{value:,}")}</text>')
    out.append("</g>")
    return out


def num(value: float) -> str:
    """A number as an SVG attribute holds it: at most one decimal."""
    text = f"{value:.1f}"
    return text[:-2] if text.endswith(".0") else text


def y_scale(peak: int) -> tuple[int, int]:
    """``(top, step)``: an integer axis from 0 to ``top`` >= ``peak`` in at most 5 steps
    of 1, 2 or 5 times a power of ten."""
    if peak <= 0:
        return 1, 1
    magnitude = 1
    while True:
        for factor in (1, 2, 5):
            step = factor * magnitude
            if -(-peak // step) <= 5:
                return step * -(-peak // step), step
        magnitude *= 10


def _x_step(n: int) -> int:
    """Minutes between labels on the time axis: at most about 6 labels."""
    for step in (1, 2, 5, 10, 15, 30, 60, 120, 240):
        if n <= step * 6:
            return step
    return -(-n // 6)
