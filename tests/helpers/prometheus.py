"""Reading a Prometheus text exposition the way a scraper does."""

from __future__ import annotations

import re

import httpx

SAMPLE = re.compile(r"^([A-Za-z_:][\w:]*)(?:\{(.*)\})? (\S+)$")
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def parse(text: str) -> list[tuple[str, dict[str, str], float]]:
    """The samples of a Prometheus text exposition: (name, labels, value)."""
    samples = []
    for line in text.splitlines():
        match = SAMPLE.match(line)
        if match and not line.startswith("#"):
            name, labels, value = match.groups()
            samples.append((name, dict(LABEL.findall(labels or "")), float(value)))
    return samples


def total(samples: list[tuple[str, dict[str, str], float]], name: str, **labels: str) -> float:
    """The sum of ``name`` over every series whose labels include ``labels``."""
    return sum(
        value
        for sample, have, value in samples
        if sample == name and all(have.get(k) == v for k, v in labels.items())
    )


def scrape(port: int, host: str = "127.0.0.1") -> str:
    response = httpx.get(f"http://{host}:{port}/metrics", timeout=5)
    response.raise_for_status()
    return response.text
