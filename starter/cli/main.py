"""The ``jobs`` group, its commands, and the entry point that turns errors into exit codes."""

from __future__ import annotations

import os
import sys

import click

from connection import tracing
from starter.cli import cron, dlq, jobs, processes
from starter.errors import JobsError, SpecError


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.pass_context
def cli(ctx: click.Context) -> None:
    """Delayed and cron jobs on Temporal."""
    # The tracing service name: jobs-worker, jobs-api, jobs-dev, else jobs-cli.
    sub = ctx.invoked_subcommand
    tracing.set_role(sub if sub in ("worker", "api", "dev") else "cli")


for command in (
    jobs.schedule,
    jobs.status,
    jobs.list_,
    jobs.cancel,
    jobs.pause,
    jobs.resume,
    jobs.trigger,
    cron.cron,
    cron.update,
    dlq.dlq,
    processes.worker,
    processes.api,
    processes.dev,
):
    cli.add_command(command)


def report_error(err: Exception) -> int:
    if isinstance(err, SpecError):
        for field, reason in err.problems:
            click.echo(f"error: {field}: {reason}", err=True)
    else:
        click.echo(f"error: {err}", err=True)
    return err.exit_code if isinstance(err, JobsError) else 1


def main(argv: list[str] | None = None) -> None:
    code = 0
    try:
        result = cli.main(args=argv, prog_name="jobs", standalone_mode=False)
        code = result if isinstance(result, int) else 0
    except click.ClickException as err:
        err.show()
        code = err.exit_code
    except click.Abort:
        code = 130
    except KeyboardInterrupt:
        code = 130
    except JobsError as err:
        code = report_error(err)
    except Exception as err:  # last resort: one line, never a traceback, still non-zero
        code = report_error(err)
    finally:
        tracing.shutdown()  # os._exit skips atexit: send the spans now (bounded wait)
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)
