"""Running everything on one machine: the Temporal dev server as a child process
(:mod:`~starter.dev.devserver`, binaries found by :mod:`~starter.dev.binaries`), ``jobctl dev``'s
whole stack in one process (:mod:`~starter.dev.stack`), the demo (:mod:`~starter.dev.demo`)
and ``jobctl worker``'s launcher (:mod:`~starter.dev.launch`).

The stack and the launcher start a worker, so they import the worker side (``worker``); no
other module of ``starter`` does.
"""
