"""Writes ``project/sample-access.log``: half an hour of the demo site's traffic in nginx's
``combined`` format, for ``python manage.py ratelimits simulate project/sample-access.log``.

Forty honest clients browse the API now and then; one abuser (203.0.113.66) scrapes the
search in bursts and tries passwords on the sign-in API. Seeded: the same file every time.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime
from pathlib import Path

START = datetime(2026, 11, 30, 10, 0, tzinfo=UTC).timestamp()
MINUTES = 30
PAGES = [("GET", "/api/search/?q=shoes", 200), ("GET", "/api/items/", 200),
         ("GET", "/api/report/", 200), ("GET", "/", 200), ("POST", "/api/login/", 200)]  # fmt: skip


def lines(seed: int = 42) -> list[tuple[float, str]]:
    rng = random.Random(seed)
    end = START + MINUTES * 60
    found = []
    for n in range(40):
        address = f"198.51.100.{n + 10}"
        at = START + rng.uniform(0, 60)
        while at < end:
            method, path, status = rng.choice(PAGES)
            found.append((at, _line(address, at, method, path, status)))
            at += rng.expovariate(1 / 25)
    at = START + 120
    while at < end:  # the abuser: 60 searches in 10 s, then a failed sign-in or two
        for _ in range(60):
            moment = at + rng.uniform(0, 10)
            path = f"/api/search/?q=item{rng.randrange(10_000)}"
            found.append((moment, _line("203.0.113.66", moment, "GET", path, 200)))
        for _ in range(rng.randrange(1, 3)):
            moment = at + rng.uniform(0, 10)
            found.append((moment, _line("203.0.113.66", moment, "POST", "/api/login/", 400)))
        at += 45
    found.sort()
    return found


def _line(address: str, at: float, method: str, path: str, status: int) -> str:
    seconds = int(at)
    stamp = datetime.fromtimestamp(seconds, tz=UTC).strftime("%d/%b/%Y:%H:%M:%S")
    millis = int((at - seconds) * 1000)
    return (
        f'{address} - - [{stamp}.{millis:03d} +0000] "{method} {path} HTTP/1.1" {status} '
        f'{200 + len(path) * 7} "-" "Mozilla/5.0 (demo)"'
    )


def main() -> None:
    target = Path(__file__).resolve().parent / "sample-access.log"
    target.write_text("".join(text + "\n" for _, text in lines()))
    print(f"wrote {target}")


if __name__ == "__main__":
    main()
