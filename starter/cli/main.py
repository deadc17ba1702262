"""The ``jobs`` group, its commands, and the entry point that turns errors into exit codes."""

from __future__ import annotations

import click

from jobctl.connection import tracing
from jobctl.starter.cli import batch, cron, dlq, handlers, jobs, limits, processes
from jobctl.starter.errors import JobsError, SpecError
from jobctl.starter.process_exit import exit_now


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
    batch.batch,
    handlers.handlers,
    limits.limits,
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


def run(argv: list[str] | None = None) -> int:
    """Run one ``jobs`` command; its exit code (errors printed as one line, never raised)."""
    try:
        result = cli.main(args=argv, prog_name="jobctl", standalone_mode=False)
    except click.ClickException as err:
        err.show()
        return err.exit_code
    except (click.Abort, KeyboardInterrupt):
        return 130
    except Exception as err:  # JobsError, else last resort: one line, never a traceback
        return report_error(err)
    return result if isinstance(result, int) else 0


def main(argv: list[str] | None = None) -> None:
    """The console script: :func:`run`, then :func:`~starter.process_exit.exit_now`."""
    exit_now(run(argv))
