"""Policy files: export the policy table to JSON or YAML and import it back.

The engine behind ``manage.py ratelimits export/import``. A policy file is::

    {"version": 1, "policies": [{"name": ..., "endpoint": ..., ...}, ...]}

with the fields of :data:`FIELDS` in every row (``version`` may be left out; a bare list of
rows is accepted too). An import is done in two steps: :func:`plan_import` validates every
row and works out what would change without writing anything, then :func:`apply_import`
writes the plan in one transaction, all or nothing.

**The file is the source of truth.** A row names the whole policy: a field left out of a row
takes the model's default (``methods`` blank, ``algorithm`` sliding_counter, ``key``
user_or_ip, ``mode`` enforce, ``counts`` all, ``fail_open`` and ``enabled`` true,
``calendar`` and ``time_zone`` blank: a rolling window, ``lockout`` 0: none,
``lockout_until_lifted``, ``extend_lockout`` and ``reset_on_success`` false,
``ipv6_prefix`` null: the ``IPV6_PREFIX`` setting, ``traffic`` true: the traffic record
on), for a new policy and for an existing one alike. Leaving ``mode`` out of the row of a
policy stored in shadow mode therefore switches it back to enforce; it does not keep the
stored value, and a row without ``calendar`` (a file written before calendars existed)
makes the policy's window rolling again. Only ``name``, ``endpoint``, ``limit`` and
``window`` are required, and ``window`` not with a ``calendar`` period, which sets it (the
period's nominal length).

Rows are checked strictly before the model sees them (no unknown fields, ``limit``,
``window``, ``lockout`` and ``ipv6_prefix`` (16 to 128, or null) are integers and not
booleans, ``fail_open``, ``enabled``, ``lockout_until_lifted``, ``extend_lockout``,
``reset_on_success`` and ``traffic`` are booleans, the other fields are strings), then
with the model's own ``full_clean()``: the normalisation of ``Policy.normalize()``, the
field validators and the database check constraints. Every problem of every row is
collected and reported in one :class:`PolicyFileError`.

**Overrides.** Each exported row has ``overrides``: the policy's overrides (see
:class:`~ratelimits.models.PolicyOverride`), one mapping each, naming the client by
``user`` (username), ``group`` (name) or ``identity`` (the stored form: ``ip:...``,
``h:<32 hex>``, a hashed API key, or ``n:<32 hex>``, a hashed username; never the key
itself, which is not stored), with ``limit`` (0: blocked) or ``exempt: true`` and
``comment`` when there is one; sorted users, groups, identities, each by name. On import
a row's ``overrides`` list replaces that policy's overrides: missing ones are deleted,
new ones created, changed ones updated, the others left alone. A row without the key
leaves the policy's overrides as they are (files written before overrides existed).
Users and groups are found by username and name; an identity is normalised as the admin
does (an API key typed in a file is hashed); every override is checked with the model's
``full_clean()`` before anything is written.

YAML needs PyYAML and is read with ``yaml.safe_load`` only, so tags such as
``!!python/object`` are refused, never executed. JSON needs nothing beyond the standard
library. Duplicate keys inside a JSON object are refused; PyYAML's ``safe_load`` keeps the
last of duplicate keys in a YAML mapping without a word.

One module per job: :mod:`~.formats` (JSON and YAML text), :mod:`~.document` (a file's
text to its rows), :mod:`~.schema` (the fields of a row and of an override), :mod:`~.rows`
(an imported row's values checked), :mod:`~.planning` and :mod:`~.overrides` (the import
plan of the policies and of their overrides, kept in :mod:`~.plans`), :mod:`~.apply`
(writing a plan), :mod:`~.export` (writing a file) and :mod:`~.errors` (how problems are
told).
"""

from ratelimits.tools.policy_files.apply import apply_import
from ratelimits.tools.policy_files.document import parse_document
from ratelimits.tools.policy_files.errors import PolicyFileError
from ratelimits.tools.policy_files.export import dump_policies, dump_rows
from ratelimits.tools.policy_files.formats import FORMATS, detect_format
from ratelimits.tools.policy_files.planning import plan_import
from ratelimits.tools.policy_files.plans import ImportPlan
from ratelimits.tools.policy_files.schema import FIELDS, override_row

__all__ = [
    "FIELDS",
    "FORMATS",
    "ImportPlan",
    "PolicyFileError",
    "apply_import",
    "detect_format",
    "dump_policies",
    "dump_rows",
    "override_row",
    "parse_document",
    "plan_import",
]
