"""The benchmark report: Markdown tables and a PNG chart from the latest results.

    python -m bench.report

Reads the newest JSON of each benchmark under bench/results/ and writes
``bench/results/report.md`` and ``bench/results/report.png`` (fire-lag CDFs of the herd,
ours vs baseline vs peer; throughput bars for the sustained run and the schedule rate).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # no display here
import matplotlib.pyplot as plt

from bench.common import RESULTS

SIDES = ("ours", "baseline", "peer")
COLOURS = {"ours": "tab:blue", "baseline": "tab:gray", "peer": "tab:orange"}


def latest(name: str) -> dict[str, Any] | None:
    files = sorted(RESULTS.glob(f"{name}-*.json"))
    return json.loads(files[-1].read_text()) if files else None


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


def ratio(ours: float | None, other: float | None) -> str:
    return f"{ours / other:.2f}" if ours is not None and other else "n/a"


def herd_section(herd: dict[str, Any]) -> list[str]:
    rows = []
    for r in herd["rows"]:
        lag = r["lag"] or {}
        rows.append(
            [
                r["side"],
                f"{r['jobs']:,}",
                f"{r.get('ahead', herd['ahead']):g}",
                f"{r['started']:,}",
                *(f"{lag.get(p, 0):.2f}" for p in ("p50", "p95", "p99", "max")),
                f"{r['drain_seconds'] or 0:.1f}",
                str(r["early"]),
            ]
        )
    header = ["side", "jobs", "notice s", "fired", "lag p50 s", "p95 s", "p99 s", "max s"]
    header += ["drain s", "early"]
    title = "### Herd: jobs due in the same second, scheduled ahead by the notice"
    return [title, "", *table(header, rows), ""]


def sustained_section(sustained: dict[str, Any]) -> list[str]:
    rows = [
        [
            r["side"],
            f"{r['jobs_per_second']:.1f}",
            f"{r['latency']['p50']:.2f}",
            f"{r['latency']['p99']:.2f}",
            f"{r['cpu_ms_per_job']['worker']:.1f}",
            f"{r['cpu_ms_per_job']['server']:.1f}",
        ]
        for r in sustained["rows"]
    ]
    header = ["side", "completed jobs/s", "e2e p50 s", "e2e p99 s", "worker CPU ms/job"]
    header.append("server CPU ms/job")
    title = (
        f"### Sustained: {sustained['loops']} closed loops for {sustained['seconds']:g} s "
        f"(jobs due 1 s after submit)"
    )
    by_side = {r["side"]: r["jobs_per_second"] for r in sustained["rows"]}
    note = f"ours/baseline = {ratio(by_side.get('ours'), by_side.get('baseline'))}"
    return [title, "", *table(header, rows), "", note, ""]


def rate_section(rate: dict[str, Any]) -> list[str]:
    medians = rate["medians"]
    rows = [
        [kind, f"{medians[kind]:.1f}", ratio(medians[kind], medians["raw"])] for kind in medians
    ]
    title = (
        f"### Schedule rate: {rate['jobs']:,} jobs, {rate['callers']} callers "
        f"(median of {len(rate['rates']['raw'])})"
    )
    return [title, "", *table(["path", "jobs/s", "vs raw"], rows), ""]


def cost_section(cost: dict[str, Any]) -> list[str]:
    def kinds(r: dict[str, Any]) -> str:
        return ", ".join(f"{k} {v:g}" for k, v in sorted(r.get("by_kind", {}).items()))

    rows = [
        [
            r["case"],
            r["side"],
            f"{r['actions']:g}" if "actions" in r else "-",  # older results counted no actions
            f"{r['events']:.1f}",
            f"{r['tasks']:.1f}",
            f"{r['visibility_writes']:.1f}" if "visibility_writes" in r else "-",
            kinds(r),
        ]
        for r in cost["rows"]
    ]
    header = [
        "case",
        "side",
        "billable actions",
        "history events",
        "workflow tasks",
        "visibility writes",
        "actions",
    ]
    title = "### Cost per job (billable actions, from real histories)"
    return [title, "", *table(header, rows), ""]


def hold_section(hold: dict[str, Any]) -> list[str]:
    rows = [
        [
            r["side"],
            f"{r['held']:,}",
            f"{r['sqlite_mib_per_1000']:.2f}",
            f"{r['server_rss_mib_per_1000']:.2f}",
            f"{r['worker_cpu_percent_idle']:.2f}",
            f"{r['describe_ms']['p50']:.1f}",
            f"{r['describe_ms']['p99']:.1f}",
        ]
        for r in hold["rows"]
    ]
    header = ["side", "held", "SQLite MiB/1k", "server RSS MiB/1k", "worker CPU % idle"]
    header += ["describe p50 ms", "p99 ms"]
    return ["### Hold: sleeping jobs (due in a day)", "", *table(header, rows), ""]


def chart(herd: dict[str, Any] | None, sustained: dict[str, Any] | None, path: Path) -> None:
    sizes = sorted({r["jobs"] for r in herd["rows"]}) if herd else []
    figure, axes = plt.subplots(1, len(sizes) + 1, figsize=(5 * (len(sizes) + 1), 4))
    axes = list(axes) if len(sizes) else [axes]
    for ax, size in zip(axes, sizes, strict=False):
        for r in herd["rows"] if herd else []:
            if r["jobs"] == size and r.get("lags"):
                lags = r["lags"]
                fraction = [(i + 1) / len(lags) for i in range(len(lags))]
                ax.step(lags, fraction, where="post", label=r["side"], color=COLOURS[r["side"]])
        ax.set_xscale("symlog", linthresh=1)
        ax.set_xlabel("fire lag (s): handler start - run_at")
        ax.set_ylabel("fraction of jobs fired")
        ax.set_title(f"herd of {size:,} due in the same second")
        ax.grid(alpha=0.3)
        ax.legend()
    bars = axes[-1]
    if sustained:
        rows = [r for side in SIDES for r in sustained["rows"] if r["side"] == side]
        bars.bar(
            [r["side"] for r in rows],
            [r["jobs_per_second"] for r in rows],
            color=[COLOURS[r["side"]] for r in rows],
        )
        bars.set_ylabel("completed jobs/s")
        bars.set_title(f"sustained closed loop, {sustained['loops']} callers")
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    plt.close(figure)


def main() -> None:
    results = {
        name: latest(name) for name in ("herd", "sustained", "schedule_rate", "cost", "hold")
    }
    sections = {
        "herd": herd_section,
        "sustained": sustained_section,
        "schedule_rate": rate_section,
        "cost": cost_section,
        "hold": hold_section,
    }
    lines = ["## Benchmark report", ""]
    for name, render in sections.items():
        data = results[name]
        if data is not None:
            lines += render(data)
            lines += [f"_{name}: {data['at']}, {data['cpus']} CPUs_", ""]
    (RESULTS / "report.md").write_text("\n".join(lines))
    chart(results["herd"], results["sustained"], RESULTS / "report.png")
    print("\n".join(lines))
    print(f"wrote {RESULTS / 'report.md'} and {RESULTS / 'report.png'}")


if __name__ == "__main__":
    main()
