"""Adoption: the site's running rate limits read into the policies that do the same, for
``manage.py ratelimits adopt``.

DRF's throttles are read as DRF runs them (:mod:`~.throttles`): each counter
``throttle_<scope>_<client>`` becomes one ``sliding_log`` policy with the same limit and
window (:mod:`~.rows`), matching exactly the views that spent it (:mod:`~.endpoints`);
a throttle whose code ratelimits cannot know, or a counter no policy can express, is
reported with the reason and nothing is written for it. Views under
``ratelimits.contrib.django_ratelimit.ratelimit`` bring their own rows (:mod:`~.specs`).
django-axes' ``AXES_*`` settings become sign-in policies (:mod:`~.axes`).
The plan (:mod:`~.plan`) is a list of policy-file rows, written like an import.

One module per job: :mod:`~.views` (the URLconf's views and their throttles),
:mod:`~.rates` (DRF's rate strings).
"""

from ratelimits.tools.adoption.outcome import Adopted, AdoptionPlan, Skipped
from ratelimits.tools.adoption.plan import plan_adoption
from ratelimits.tools.adoption.specs import SpecRows
from ratelimits.tools.adoption.views import SPEC_ATTRIBUTE, SPECS_ATTRIBUTE

__all__ = [
    "SPECS_ATTRIBUTE",
    "SPEC_ATTRIBUTE",
    "Adopted",
    "AdoptionPlan",
    "Skipped",
    "SpecRows",
    "plan_adoption",
]
