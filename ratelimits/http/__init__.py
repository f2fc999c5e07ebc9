"""Internal, not part of the public API (see docs/api.md).

Between Django requests and the engine: the facts a face reads off a request
(:mod:`~ratelimits.http.request_facts`) and the RateLimit response fields every face writes
(:mod:`~ratelimits.http.headers`)."""
