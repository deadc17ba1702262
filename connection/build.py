"""Our build ID, and the ``BuildIds`` starts carry from it.

Every worker reports :func:`build_id` to Temporal and every starter presets a workflow's
``BuildIds`` from it, so both sides must compute the same value without talking to each
other: a digest of the workflow code (``workflows/``), the code a build ID stands for in
Temporal (its reset points name the build that completed a workflow task). It changes when
that code does; starter and worker agree whenever they run the same ``workflows/``.

Temporal writes its own ``BuildIds`` search attribute (:func:`build_ids`) when a worker
without versioning completes a workflow's first task: one visibility write per workflow, a
third of a job's (its start, this one, its close). A workflow started with that value already
has it, so the completion changes nothing and the server skips the write.

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

from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.service import RPCError, RPCStatusCode

from jobctl import workflows
from jobctl.workflows import names
from jobctl.workflows.models import BUILD_IDS

BUILD_PREFIX = "jobs-"
DIGEST_CHARS = 16
_offered = True  # until a server refuses the preset, for this process's lifetime


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


def build_ids(build: str) -> list[str]:
    """``BuildIds`` as Temporal writes it when a worker without versioning, built as
    ``build``, completes a workflow's first task."""
    return [names.UNVERSIONED, f"{names.UNVERSIONED}:{build}"]


def preset(attrs: TypedSearchAttributes) -> TypedSearchAttributes:
    """``attrs`` plus this build's ``BuildIds``, unless a server here refused it before."""
    if not _offered:
        return attrs
    return TypedSearchAttributes([*attrs, SearchAttributePair(BUILD_IDS, build_ids(build_id()))])


def refused(err: RPCError) -> bool:
    """Whether ``err`` is a server refusing the preset; if so, no later start carries it."""
    global _offered
    if err.status != RPCStatusCode.INVALID_ARGUMENT or BUILD_IDS.name not in err.message:
        return False
    _offered = False
    return True
