"""Connection plumbing both sides import: the worker (worker.py) and the client side
(starter/). Where to connect and how (:mod:`connection.client`: profiles, task queue, data
converter), payload encryption (:mod:`connection.codec`), tracing (:mod:`connection.tracing`)
and the base errors (:mod:`connection.errors`). Imports only the standard library, third-party
packages and :mod:`workflows`."""
