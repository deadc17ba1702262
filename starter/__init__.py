"""The client side: the operations library, the CLI, the API, the board, the dev stack, the
Python client (:mod:`jobctl.starter.jobsclient`) and short starter scripts."""
