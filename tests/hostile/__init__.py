"""Hostile input, one door per module: each case asserts the answer, that nothing started,
and that a normal job still runs afterwards (``common.py``)."""
