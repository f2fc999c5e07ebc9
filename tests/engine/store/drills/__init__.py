"""Failure drills under load: 8 threads, each with its own Django test client, send requests
through the full stack while Redis is killed, flushed, restarted, paused, or a policy is
edited. Every loop is bounded by a request count and a deadline. A drill moves on when
what it waits for has happened (enough requests answered, a table swapped in), never
after a fixed sleep, so a slow or loaded machine makes it slower, not failing; what
decides each request never depends on the machine's speed either: the drills that do not
measure the timeout give Redis a generous one (:data:`PATIENT_TIMEOUT`).

The promises (README, "When Redis is unavailable"): never a 500; each policy's fail mode
while Redis cannot answer, within ``SOCKET_TIMEOUT``; limiting resumes once Redis answers;
admission stays exact through script flushes and restarts; an edit holds in the editing
process once the table it starts building after the commit is swapped in, and in every
other worker within ``POLICY_REFRESH_INTERVAL`` and the time its new table takes to
build.
"""
