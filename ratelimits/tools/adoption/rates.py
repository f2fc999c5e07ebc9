"""DRF's throttle rates read as DRF reads them: ``"100/hour"`` is 100 requests per 3600 s."""

from __future__ import annotations

#: The seconds of a period by its first letter: DRF reads nothing after it (``"5/min"``,
#: ``"5/m"`` and ``"5/minute"`` are one rate).
PERIODS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_rate(rate: object) -> tuple[int, int]:
    """``(limit, window)`` of a DRF rate such as ``"5/min"``; ``ValueError`` saying why
    when DRF could not read it, or when it admits no request (a policy's limit is at
    least 1)."""
    if not isinstance(rate, str) or rate.count("/") != 1:
        raise ValueError(f"the rate {rate!r} is not one DRF reads ('<requests>/<period>')")
    number, period = rate.split("/")
    try:
        limit = int(number)
    except ValueError:
        raise ValueError(f"the rate {rate!r} does not start with a whole number") from None
    window = PERIODS.get(period[:1])
    if window is None:
        raise ValueError(f"the rate {rate!r} has no period DRF reads (s, m, h or d)")
    if limit < 1:
        raise ValueError(
            f"the rate {rate!r} denies every request; a policy admits at least 1 per window"
        )
    return limit, window
