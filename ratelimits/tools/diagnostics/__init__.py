"""What the deploy check, the admin and Prometheus ask of the counters' Redis: what its
ACL lets this client do (:mod:`~.acl`, with :mod:`~.acl_needs` and :mod:`~.acl_probe`)
and whether it may evict counters (:mod:`~.eviction`). Never on the request path."""
