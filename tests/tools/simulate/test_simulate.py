"""``ratelimits simulate``: replays decided by the real scripts equal an independent exact
limiter written in Python, in every log format, from every kind of input."""

from __future__ import annotations

import gzip
import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from tests.helpers.policies import make_policy
from tests.tools.simulate import traffic_log
from tests.tools.simulate.traffic_log import Hit

LIMIT, WINDOW = 10, 20


@pytest.fixture
def url(redis_server: Any) -> str:
    return redis_server.url


def simulate(*args: str, stdin: bytes | None = None) -> tuple[dict[str, Any], int]:
    """The JSON report of ``simulate *args`` and its exit status (0, or the error's)."""
    out = io.StringIO()
    status = 0
    saved = sys.stdin
    if stdin is not None:
        sys.stdin = io.TextIOWrapper(io.BytesIO(stdin))
    try:
        call_command("ratelimits", "simulate", *args, "--json", stdout=out, stderr=io.StringIO())
    except CommandError as e:
        status = e.returncode
        if not out.getvalue():
            raise
    finally:
        sys.stdin = saved
    return json.loads(out.getvalue()), status


def proposed(url: str, algorithm: str = "sliding_log", *more: str) -> list[str]:
    return [
        "--redis", url, "--endpoint", "api:search", "--algorithm", algorithm,
        "--limit", str(LIMIT), "--window", str(WINDOW), "--key", "ip", "--top", "all", *more,
    ]  # fmt: skip


def per_client(policy: dict[str, Any]) -> dict[str, tuple[int, int]]:
    return {row["client"]: (row["admitted"], row["denied"]) for row in policy["top"]}


@pytest.fixture(scope="module")
def hits() -> list[Hit]:
    return traffic_log.generated()


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize(
    ("algorithm", "reference"),
    [
        ("sliding_log", traffic_log.sliding_log),
        ("compact_log", traffic_log.sliding_log),
        ("fixed_window", traffic_log.fixed_window),
    ],
)
def test_equal_to_the_exact_reference_per_client(
    tmp_path: Path, url: str, hits: list[Hit], algorithm: str, reference: Any
) -> None:
    log = write(tmp_path, "access.log", traffic_log.combined(hits))
    report, status = simulate(log, *proposed(url, algorithm))
    expected = reference(hits, LIMIT, WINDOW)
    (policy,) = report["policies"]
    assert status == 0 and report["complete"]
    assert report["lines"] == report["replayed"] == len(hits)
    assert per_client(policy) == expected
    assert policy["denied"] == sum(d for _, d in expected.values()) > 0
    assert policy["clients_denied"] == 3  # the abusers, never an honest client
    assert policy["peak_per_window"]["max"] >= 40  # a burst's 40 requests in 2 s


@pytest.mark.parametrize(
    ("name", "render"),
    [
        ("common.log", traffic_log.common),
        ("iso.jsonl", traffic_log.json_lines),
        ("msec.jsonl", lambda hits: traffic_log.json_lines(hits, epoch=True)),
        ("log.csv", traffic_log.csv_text),
    ],
)
def test_every_format_is_detected_and_decides_the_same(
    tmp_path: Path, url: str, hits: list[Hit], name: str, render: Any
) -> None:
    log = write(tmp_path, name, render(hits))
    report, _ = simulate(log, *proposed(url))
    assert report["complete"]
    assert per_client(report["policies"][0]) == traffic_log.sliding_log(hits, LIMIT, WINDOW)


def test_gzip_stdin_and_several_files_merged_in_time_order(
    tmp_path: Path, url: str, hits: list[Hit]
) -> None:
    expected = traffic_log.sliding_log(hits, LIMIT, WINDOW)
    zipped = tmp_path / "access.log.gz"
    zipped.write_bytes(gzip.compress(traffic_log.combined(hits).encode()))
    report, _ = simulate(str(zipped), *proposed(url))
    assert per_client(report["policies"][0]) == expected
    report, _ = simulate("-", *proposed(url), stdin=traffic_log.combined(hits).encode())
    assert per_client(report["policies"][0]) == expected
    # Two workers' logs, each holding every other line, one in JSON: merged by time.
    first = write(tmp_path, "a.log", traffic_log.combined(hits[0::2]))
    second = write(tmp_path, "b.jsonl", traffic_log.json_lines(hits[1::2]))
    report, _ = simulate(first, second, *proposed(url))
    assert report["replayed"] == len(hits)
    assert per_client(report["policies"][0]) == expected


def test_lines_out_of_order_within_the_tolerance_are_put_back(
    tmp_path: Path, url: str, hits: list[Hit]
) -> None:
    shuffled = list(hits)
    for i in range(0, len(shuffled) - 1, 2):  # neighbours swapped: well under 5 s apart
        shuffled[i], shuffled[i + 1] = shuffled[i + 1], shuffled[i]
    report, _ = simulate(write(tmp_path, "a.log", traffic_log.combined(shuffled)), *proposed(url))
    assert report["skipped"] == 0
    assert per_client(report["policies"][0]) == traffic_log.sliding_log(hits, LIMIT, WINDOW)


def test_bad_input_is_counted_and_reported_never_raised(
    tmp_path: Path, url: str, hits: list[Hit]
) -> None:
    lines = traffic_log.combined(hits).splitlines()
    late = traffic_log.combined([Hit(hits[-1].time_us - 60_000_000, "192.0.2.9")]).strip()
    lines[10:10] = ["this is not a log line"]
    lines.append(late)  # a minute behind the line before it
    log = write(tmp_path, "a.log", "\n".join(lines) + "\n")
    no_time = write(tmp_path, "b.jsonl", '{"remote_addr": "192.0.2.1", "request": "GET / x"}\n')
    binary = tmp_path / "c.bin"
    binary.write_bytes(b"\x00\x01\x02" * 100)
    empty = write(tmp_path, "d.log", "")
    report, status = simulate(log, no_time, str(binary), empty, *proposed(url))
    assert status == 3 and report["complete"] is False
    assert report["skipped"] == 3
    reasons = [example["reason"] for example in report["skipped_examples"]]
    assert any("not a line of the common or combined" in r for r in reasons)
    assert any(r.startswith("out of order: 5") for r in reasons)  # 55 s or so behind
    assert any("no time field" in r for r in reasons)
    problems = {f["file"]: f.get("problem", "") for f in report["files"]}
    assert "binary" in problems[str(binary)] and "empty" in problems[empty]
    assert report["replayed"] == len(hits)
    assert per_client(report["policies"][0]) == traffic_log.sliding_log(hits, LIMIT, WINDOW)


def test_a_server_holding_the_sites_keys_is_refused_unless_scratch(
    tmp_path: Path, url: str, redis_server: Any, hits: list[Hit]
) -> None:
    live = redis_server.client()
    live.set("rl:{ip:192.0.2.1}:search:log", "1")
    log = write(tmp_path, "a.log", traffic_log.combined(hits[:20]))
    with pytest.raises(CommandError, match="holds the site's rate limit keys"):
        simulate(log, *proposed(url))
    report, _ = simulate(log, *proposed(url, "sliding_log", "--scratch"))
    assert report["policies"][0]["requests"] == 20
    assert live.get("rl:{ip:192.0.2.1}:search:log") == b"1"  # untouched
    assert [k for k in live.scan_iter("rl-simulate:*")] == []  # the replay's keys are gone


def test_sweeps_of_limits_and_algorithms(tmp_path: Path, url: str, hits: list[Hit]) -> None:
    log = write(tmp_path, "a.log", traffic_log.combined(hits))
    args = proposed(url, "sliding_log", "--limits", "5,10", "--algorithms", "all")
    report, _ = simulate(log, *args)
    by = {(p["limit"], p["algorithm"]): p for p in report["policies"]}
    assert {algorithm for _, algorithm in by} == {
        "sliding_log", "compact_log", "sliding_counter", "fixed_window", "token_bucket"
    }  # fmt: skip
    for limit in (5, 10):
        exact = traffic_log.sliding_log(hits, limit, WINDOW)
        assert per_client(by[(limit, "sliding_log")]) == exact
        assert by[(limit, "compact_log")]["differs_from_sliding_log"] == {
            "admitted_where_exact_denied": 0,
            "denied_where_exact_admitted": 0,
        }
        assert by[(limit, "fixed_window")]["memory_per_client"] > 0
    fixed = by[(10, "fixed_window")]["differs_from_sliding_log"]
    assert fixed["admitted_where_exact_denied"] > 0  # the boundary burst


@pytest.mark.django_db
def test_saved_policies_are_matched_as_live_requests(
    tmp_path: Path, url: str, hits: list[Hit]
) -> None:
    make_policy("search", endpoint="api:search", limit=LIMIT, window=WINDOW, mode="shadow")
    make_policy("items", endpoint="/api/items/*", methods="POST", limit=1, window=WINDOW)
    make_policy("keyed", endpoint="api:search", key="header:X-Api-Key", limit=1, window=60)
    other = [Hit(h.time_us + 1, h.address, path="/api/items/") for h in hits[:30]]
    log = write(
        tmp_path, "a.log", traffic_log.combined(sorted(hits + other, key=lambda h: h.time_us))
    )
    report, _ = simulate(log, "--redis", url, "--top", "all")
    by = {p["name"]: p for p in report["policies"]}
    # search (a shadow policy, replayed as it would deny) by its URL name; items only
    # for POST: the GETs meet no policy; the header the log does not show is named.
    assert set(by) == {"search", "items"}
    assert per_client(by["search"]) == traffic_log.sliding_log(hits, LIMIT, WINDOW)
    assert by["items"]["requests"] == 0
    assert report["unmatched"] == 30
    (keyed,) = report["left_out"]
    assert keyed["policy"] == "keyed" and "http_x_api_key" in keyed["reason"]
