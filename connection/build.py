"""Our build ID, and whether starts may carry ``BuildIds`` (workflows.job_rules.build_ids).

Every worker reports :func:`build_id` to Temporal and every starter presets a workflow's
``BuildIds`` from it, so both sides must compute the same value without talking to each
other: a digest of the workflow code (``workflows/``), the code a build ID stands for in
Temporal (its reset points name the build that completed a workflow task). It changes when
that code does; starter and worker agree whenever they run the same ``workflows/``.

Temporal lets a start set ``BuildIds`` today (one of its "predefined" attributes it still
accepts from users) and says it may stop. A server that refuses it answers the start with
INVALID_ARGUMENT naming the attribute; :func:`refused` recognises that answer, and this
process then starts without the preset from then on (each job costs that server its usual
visibility write, nothing else changes). Only starts from a client carry it: a workflow that
started a child with it could not start it again without, so a refusal would fail its
workflow task over and over (a cron would stop); a cron slot's job goes without.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

from temporalio.common import TypedSearchAttributes
from temporalio.service import RPCError, RPCStatusCode

import workflows
from workflows.job_rules import with_build_ids
from workflows.models import BUILD_IDS

BUILD_PREFIX = "jobs-"
DIGEST_CHARS = 16
_refused: set[str] = set()  # preset keys a server refused, for this process's lifetime


def source_digest(root: Path) -> str:
    """A digest of every ``.py`` file under ``root`` (relative path and bytes, in order)."""
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()[:DIGEST_CHARS]


@functools.cache
def build_id() -> str:
    """``jobs-`` and the digest of ``workflows/`` (computed once per process, 1.4 ms here)."""
    return BUILD_PREFIX + source_digest(Path(workflows.__file__).parent)


def preset(attrs: TypedSearchAttributes) -> TypedSearchAttributes:
    """``attrs`` plus this build's ``BuildIds``, unless a server here refused it before."""
    if BUILD_IDS.name in _refused:
        return attrs
    return with_build_ids(attrs, build_id())


def refused(err: RPCError) -> bool:
    """Whether ``err`` is a server refusing the preset; if so, no later start carries it."""
    if err.status != RPCStatusCode.INVALID_ARGUMENT or BUILD_IDS.name not in err.message:
        return False
    _refused.add(BUILD_IDS.name)
    return True
