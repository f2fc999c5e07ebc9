"""A project's throttle tests under its own policies: loaded from the plan ``adopt`` wrote
(or any policy file) or kept as the test database holds them, the counters cleared before
and after each test, the policy table built in the test's thread (which sees the test's
open transaction), and a policy changed for one test (:class:`override_policy`, what
``override_settings(REST_FRAMEWORK=...)`` of DRF's rates was).

:func:`policies_for_test` does it all as a context manager; :class:`RateLimitsTestMixin`
(a ``TestCase``) and the ``ratelimits_policies`` fixture (:mod:`~.fixtures`, pytest) use it.
Imports of the app are made inside the functions: test settings import this package
before Django is set up."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import ContextDecorator, contextmanager
from pathlib import Path
from typing import Any, ClassVar

from ratelimits.conf import reset_registered

#: A policy file: its path, as ``adopt --output`` or ``export`` wrote it (JSON or YAML).
PolicyFile = str | os.PathLike[str]


def reset_state() -> None:
    """Forget every per-process cache and state of the app: what its modules registered
    with :mod:`ratelimits.conf` (the policy table, the Redis clients, the breakers, the
    unsent request counts, stopping the metrics flusher, the shadow log's clients, and
    every cache built from a setting). The next request starts from the settings, the
    database and Redis alone."""
    reset_registered()


def load_policies(policy_file: PolicyFile | None = None) -> list[str]:
    """Write the policies of ``policy_file`` into the database as ``import`` does (each row
    validated, one transaction); ``None`` leaves the database's policies as they are.
    Returns the names of the policies the database holds then. A file that does not read
    or validate raises ``ValueError`` saying which row and why."""
    from ratelimits.models import Policy
    from ratelimits.tools import policy_files

    if policy_file is not None:
        path = Path(policy_file)
        try:
            text = path.read_text(encoding="utf-8")
            rows = policy_files.parse_document(text, policy_files.detect_format(path), str(path))
            policy_files.apply_import(policy_files.plan_import(rows))
        except (OSError, policy_files.PolicyFileError) as e:
            raise ValueError(f"The policies of {path} were not loaded: {e}") from None
    return list(Policy.objects.order_by("name").values_list("name", flat=True))


def clear_counters() -> int:
    """Delete every key of the limiter (under ``RATELIMITS["KEY_PREFIX"]``) in its Redis,
    scanning, never ``KEYS``; the project's other keys (its cache) stay. The process's own
    state goes too (:func:`reset_state`: the denials it remembers, its table). Returns how
    many keys were deleted."""
    from ratelimits.conf import app_settings
    from ratelimits.engine.store import connection

    client = connection.get_tool_client()
    pattern = f"{app_settings.KEY_PREFIX}:*"
    deleted = 0
    for node in connection.node_clients(client):
        batch = []
        for key in node.scan_iter(match=pattern, count=1000):
            batch.append(key)
            if len(batch) == 500:
                deleted += node.delete(*batch)
                batch = []
        if batch:
            deleted += node.delete(*batch)
    reset_state()
    return deleted


def build_tables_in_test_thread(synchronously: bool = True) -> None:
    """Build the policy table in the request's thread from now on (``synchronously``), so
    that it reads the test's own open transaction and an edit applies at the next request;
    ``False`` goes back to the app's background builds."""
    from ratelimits.database import policy_source
    from ratelimits.engine.table import current as table

    table.set_source(
        policy_source.load, policy_source.close_connections, in_background=not synchronously
    )


@contextmanager
def policies_for_test(policy_file: PolicyFile | None = None) -> Iterator[list[str]]:
    """For the ``with`` block: the policies of ``policy_file`` (``None``: the database's),
    no counters, the table built in the test's thread; the counters cleared again and the
    background builds back afterwards. Yields the policies' names."""
    names = load_policies(policy_file)
    clear_counters()
    build_tables_in_test_thread()
    try:
        yield names
    finally:
        clear_counters()
        build_tables_in_test_thread(False)


class override_policy(ContextDecorator):
    """Change a policy's fields for a test, then put them back; the change applies to the
    next request (the table is built again in the test's thread), and the counts made
    so far are kept, as an edit in the admin keeps them::

        with override_policy("drf-user", limit=2):
            ...

        @override_policy("drf-user", limit=2, window=60)
        def test_the_third_request_is_denied(client): ...

    Any field of the policy can be given (``limit``, ``window``, ``mode``, ``enabled``,
    ``key`` ...); an unknown policy or field, or a value the model refuses, raises
    ``ValueError`` naming it."""

    def __init__(self, name: str, **fields: Any) -> None:
        if not fields:
            raise ValueError("override_policy needs at least one field, such as limit=2.")
        self.name = name
        self.fields = fields
        self._before: dict[str, Any] = {}

    def __enter__(self) -> override_policy:
        from django.core.exceptions import FieldDoesNotExist, ValidationError

        from ratelimits.models import Policy

        policy = Policy.objects.filter(name=self.name).first()
        if policy is None:
            names = ", ".join(Policy.objects.order_by("name").values_list("name", flat=True))
            raise ValueError(f"There is no policy {self.name!r} (policies: {names or 'none'}).")
        for field in self.fields:
            try:
                Policy._meta.get_field(field)
            except FieldDoesNotExist:
                raise ValueError(f"A policy has no field {field!r}.") from None
        self._before = {field: getattr(policy, field) for field in self.fields}
        for field, value in self.fields.items():
            setattr(policy, field, value)
        try:
            policy.full_clean()
        except ValidationError as e:
            raise ValueError(f"override_policy({self.name!r}): {e.messages}") from None
        self._save(policy)
        return self

    def __exit__(self, *exc_info: object) -> None:
        from ratelimits.models import Policy

        policy = Policy.objects.filter(name=self.name).first()
        if policy is not None:  # the test may have deleted it
            for field, value in self._before.items():
                setattr(policy, field, value)
            self._save(policy)

    @staticmethod
    def _save(policy: Any) -> None:
        from ratelimits.engine.table import current as table

        policy.save()
        build_tables_in_test_thread()
        table.reset()


class RateLimitsTestMixin:
    """A ``TestCase`` mixin (put it before ``TestCase``): each test runs under the policies
    of :attr:`ratelimits_policy_file` (``None``: the test database's), with no counters
    and the table built in the test's thread; the counters are cleared after it too.
    ``self.ratelimits_policies`` holds the policies' names."""

    #: The policy file to load before each test (``adopt --output`` wrote it).
    ratelimits_policy_file: ClassVar[PolicyFile | None] = None
    ratelimits_policies: list[str]

    def setUp(self) -> None:
        super().setUp()  # type: ignore[misc]
        loaded = policies_for_test(self.ratelimits_policy_file)
        self.ratelimits_policies = self.enterContext(loaded)  # type: ignore[attr-defined]
