"""What a policy's clients did: the traffic record the decide call's replies keep.

- :mod:`~.levels`: the log-spaced scale of use (1, 2, 3, 4, 5, 6, 8, 10, 13, 16, 20, 25, ...);
- :mod:`~.record`: the crossings of those levels counted in memory per policy and hour, from
  each reply (no Redis call on the request path), and sent by a flusher thread;
- :mod:`~.reading`: the hours read back, summed over a span (for the tools).
"""
