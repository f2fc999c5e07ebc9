"""What the policy file tests share: a valid row to vary, a snapshot of the stored policies
and policies that use every field."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from ratelimits.models import Policy
from ratelimits.tools.policy_files import FIELDS
from ratelimits.validators import MAX_WINDOW

#: A valid file row: the required fields only.
ROW: dict[str, Any] = {"name": "login", "endpoint": "api:login", "limit": 5, "window": 60}

RowFactory = Callable[..., dict[str, Any]]
Snapshot = Callable[[], list[tuple[Any, ...]]]


@pytest.fixture
def row() -> RowFactory:
    """``row(limit=50)``: a valid file row (:data:`ROW`) with the given fields changed."""

    def make(**fields: Any) -> dict[str, Any]:
        return {**ROW, **fields}

    return make


@pytest.fixture
def snapshot() -> Snapshot:
    """``snapshot()``: every stored policy, timestamps included, to prove that nothing was
    written."""

    def take() -> list[tuple[Any, ...]]:
        return list(Policy.objects.order_by("pk").values_list(*FIELDS, "created_at", "updated_at"))

    return take


@pytest.fixture
def varied() -> list[Policy]:
    """Policies that use every field, with values that YAML would misread unless quoted."""
    return [
        Policy.objects.create(name="search", endpoint="api:search", limit=30, window=60),
        Policy.objects.create(
            name="on",
            endpoint="*.json",
            methods="post,get",
            algorithm="sliding_log",
            limit=1,
            window=MAX_WINDOW,
            key="header:X-Api-Key",
            mode="shadow",
            fail_open=False,
            enabled=False,
        ),
        Policy.objects.create(
            name="123", endpoint="/api/*", algorithm="fixed_window", limit=100, window=1, key="ip"
        ),
        Policy.objects.create(
            name="null", endpoint="&anchor", methods="DELETE", limit=7, window=3600, key="global"
        ),
    ]
