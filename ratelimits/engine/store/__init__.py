"""The engine's Redis side: the client and its connection pool (:mod:`~.connection`), a
circuit breaker per server (:mod:`~.breaker`), and the Lua files (:mod:`~.scripts`)."""
