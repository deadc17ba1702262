"""Failures that fit: every failure ``run_job`` raises is cut to size by us, never by the server.

The server keeps a retrying activity's last failure in the workflow's mutable state, and one
over ``limit.mutableStateActivityFailureSize.error`` (4096 bytes of encoded ``Failure``; the
default of the dev server we ship, Temporal Server 1.32.0: a failure of exactly 4096 bytes is
kept, one of 4097 is not) is replaced by ``Failure exceeds size limit.``. ``jobctl status``,
``GET /jobs/{id}`` and the board read the last error from there while a job retries.

So a failure is cut before it leaves the worker: the message keeps its first
:data:`MESSAGE_BYTES` bytes and says it was cut; the stack trace keeps its innermost
:data:`STACK_BYTES`; the cause chain keeps :data:`MAX_CAUSES` links, each shorter still; and
whatever remains is shed (stack traces, then causes) until the failure, details aside, is
within :data:`FAILURE_BUDGET` (the server's warning level, half its limit). The cut failure is
handed to the SDK as its own ``Failure`` proto, which it sends unchanged.

Details are not cut here: a retry failure carries none (the attempt log travels in heartbeat
details), and the round's last failure, which the server writes into history and never keeps
as a retry failure, carries the round's attempt log for the workflow.
"""

from __future__ import annotations

from temporalio.api.failure.v1 import Failure
from temporalio.converter import DataConverter
from temporalio.exceptions import ApplicationError

from jobctl.workflows.textclip import clip_bytes, clip_bytes_tail

# The server's limit for a retry failure kept in mutable state (see the module docstring).
SERVER_FAILURE_LIMIT = 4096
# What a failure of ours may take, its details aside: the server's warning level.
FAILURE_BUDGET = 2048
MESSAGE_BYTES = 1024  # an attempt's error message, in the failure and in the attempt log
STACK_BYTES = 512  # the innermost part of a stack trace
MAX_CAUSES = 2  # links of the cause chain kept under the failure itself
CAUSE_BYTES = 160  # message and stack trace of each kept cause


def clip(text: str, limit: int = MESSAGE_BYTES) -> str:
    """An attempt's error message cut to ``limit`` bytes (see textclip.clip_bytes)."""
    return clip_bytes(text, limit)


def size_without_details(failure: Failure) -> int:
    """Encoded size of ``failure``, its application details left out."""
    if not failure.application_failure_info.details.payloads:
        return failure.ByteSize()
    bare = Failure()
    bare.CopyFrom(failure)
    bare.application_failure_info.ClearField("details")
    return bare.ByteSize()


def cut(failure: Failure, budget: int = FAILURE_BUDGET) -> Failure:
    """Cut ``failure`` in place until, details aside, it is within ``budget`` bytes."""
    failure.message = clip(failure.message)
    failure.stack_trace = clip_bytes_tail(failure.stack_trace, STACK_BYTES)
    link, depth = failure, 0
    while link.HasField("cause"):
        if depth == MAX_CAUSES:
            link.ClearField("cause")
            break
        link = link.cause
        depth += 1
        link.message = clip(link.message, CAUSE_BYTES)
        link.stack_trace = clip_bytes_tail(link.stack_trace, CAUSE_BYTES)
    for shed in (_shed_cause_stacks, _shed_causes, _shed_own_stack):
        if size_without_details(failure) <= budget:
            break
        shed(failure)
    if size_without_details(failure) > budget:  # only a huge type name is left to blame
        failure.message = clip(failure.message, budget // 4)
        failure.application_failure_info.type = clip(failure.application_failure_info.type, 128)
    return failure


def _shed_cause_stacks(failure: Failure) -> None:
    link = failure
    while link.HasField("cause"):
        link = link.cause
        link.stack_trace = ""


def _shed_causes(failure: Failure) -> None:
    failure.ClearField("cause")


def _shed_own_stack(failure: Failure) -> None:
    failure.stack_trace = ""


def fitted(error: ApplicationError, converter: DataConverter) -> ApplicationError:
    """``error`` (with its cause chain) as the SDK would send it, cut to size. The SDK sends
    an error's own ``Failure`` unchanged, so what leaves the worker is exactly what we cut."""
    failure = Failure()
    converter.failure_converter.to_failure(error, converter.payload_converter, failure)
    out = converter.failure_converter.from_failure(cut(failure), converter.payload_converter)
    assert isinstance(out, ApplicationError)
    return out


def handler_failure(
    failure: ApplicationError, err: BaseException, converter: DataConverter
) -> ApplicationError:
    """``failure`` for the handler's exception ``err``, cut to size: its stack trace is where
    the handler raised ``err``, its causes are ``err``'s own (as the SDK would convert ``err``)."""
    failure.__traceback__ = err.__traceback__
    failure.__cause__ = err.__cause__
    return fitted(failure, converter)
