"""The Traffic panel's chart: how many clients reached each level of use in a window, one
bar a level, with the current limit (and a what-if limit) marked. An inline SVG drawn on
the server like the dashboard's (:mod:`~.chart`): no JavaScript, every text escaped,
``role="img"`` with a title and a description, a tooltip per bar, ``currentColor`` for
text and axes; the limit is marked by colour and a dash pattern (Okabe-Ito palette)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from ratelimits.admin.chart import num, y_axis, y_scale

BAR = "#0072B2"
LIMIT = "#D55E00"
WHAT_IF = "#009E73"
MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP, MARGIN_BOTTOM = 52, 14, 30, 40


def render_levels(
    policy: str,
    levels: Sequence[dict[str, int]],
    limit: int,
    what_if: int | None = None,
    *,
    width: int = 640,
    height: int = 240,
) -> SafeString:
    """``levels`` (``[{"at_least": level, "clients": n}]``, ascending) as bars, with a line
    at the current ``limit`` and one at ``what_if`` (when given)."""
    if not levels:
        raise ValueError("no levels to draw")
    n = len(levels)
    x0, x1 = MARGIN_LEFT, width - MARGIN_RIGHT
    y0, y1 = MARGIN_TOP, height - MARGIN_BOTTOM
    top, step = y_scale(max(level["clients"] for level in levels))
    column = (x1 - x0) / n

    def y(value: float) -> float:
        return y1 - (y1 - y0) * value / top

    def x_of(value: int) -> float:
        """Where ``value`` falls on the level axis: between the bars of the levels around it."""
        for i, level in enumerate(levels):
            if value < level["at_least"]:
                if i == 0:
                    return float(x0)
                below = levels[i - 1]["at_least"]
                share = (value - below) / (level["at_least"] - below)
                return x0 + column * (i - 0.5 + share)
        return x0 + column * (n - 0.5)

    uid = "rlt-" + hashlib.sha256(policy.encode()).hexdigest()[:12]
    name = escape(policy)
    summary = "; ".join(f"{lv['clients']:,} reached {lv['at_least']:,}" for lv in levels)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-labelledby="{uid}-t {uid}-d" '
        f'class="ratelimits-traffic-chart" data-policy="{name}" font-family="sans-serif" '
        f'font-size="11">',
        f'<title id="{uid}-t">Clients by the use they reached in a window, policy {name}; '
        f"the limit is {limit:,}</title>",
        f'<desc id="{uid}-d">{escape(summary)}.</desc>',
        *y_axis((x0, y0, x1, y1), top, step, y),
    ]
    out.append(f'<g class="bars" fill="{BAR}">')
    every = max(1, -(-n // 12))
    labels = []
    for i, level in enumerate(levels):
        left = x0 + column * i + column * 0.15
        clients = level["clients"]
        out.append(
            f'<rect class="bar" data-level="{level["at_least"]}" data-clients="{clients}" '
            f'x="{num(left)}" y="{num(y(clients))}" width="{num(column * 0.7)}" '
            f'height="{num(y1 - y(clients))}"><title>{clients:,} clients reached '
            f"{level['at_least']:,}</title></rect>"
        )
        if i % every == 0:
            labels.append(
                f'<text x="{num(x0 + column * (i + 0.5))}" y="{y1 + 14}">'
                f"{level['at_least']:,}</text>"
            )
    out.append("</g>")
    out.append('<g class="x-ticks" fill="currentColor" text-anchor="middle">')
    out.extend(labels)
    out.append("</g>")
    out.append(
        f'<text class="x-title" fill="currentColor" text-anchor="middle" '
        f'x="{num((x0 + x1) / 2)}" y="{height - 6}">use reached in a window (at least)</text>'
        f'<text class="y-title" fill="currentColor" text-anchor="middle" '
        f'transform="translate(12 {num((y0 + y1) / 2)}) rotate(-90)">clients</text>'
    )
    marks = [("limit", f"limit {limit:,}", limit + 1, LIMIT, "6 3")]
    if what_if is not None and what_if != limit:
        marks.append(("what-if", f"what if {what_if:,}", what_if + 1, WHAT_IF, "2 3"))
    lx = float(x0)
    for kind, label, at, colour, dash in marks:
        # The line stands where use passes the limit: the clients right of it were denied.
        x = num(x_of(at))
        out.append(
            f'<line class="{kind}" x1="{x}" y1="{y0}" x2="{x}" y2="{y1}" stroke="{colour}" '
            f'stroke-width="2" stroke-dasharray="{dash}"><title>{escape(label)}</title></line>'
            f'<line x1="{num(lx)}" y1="12" x2="{num(lx + 22)}" y2="12" stroke="{colour}" '
            f'stroke-width="2" stroke-dasharray="{dash}"/>'
            f'<text fill="currentColor" x="{num(lx + 27)}" y="16">{escape(label)}</text>'
        )
        lx += 27 + len(label) * 6.2 + 14
    out.append("</svg>")
    return mark_safe("".join(out))  # every text above is escaped
