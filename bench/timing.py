"""Repeated measurements and their summary: min, median, p95, max."""

from __future__ import annotations

import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any


def summary(samples_ms: Sequence[float]) -> dict[str, float]:
    ordered = sorted(samples_ms)
    if not ordered:
        return {"n": 0}
    p95 = ordered[min(len(ordered) - 1, max(0, round(0.95 * len(ordered)) - 1))]
    return {
        "n": len(ordered),
        "min": round(ordered[0], 3),
        "p50": round(statistics.median(ordered), 3),
        "p95": round(p95, 3),
        "max": round(ordered[-1], 3),
    }


def measure(call: Callable[[], Any], repeat: int) -> tuple[dict[str, float], list[Any]]:
    samples, results = [], []
    for _ in range(repeat):
        started = time.perf_counter()
        results.append(call())
        samples.append((time.perf_counter() - started) * 1000)
    return summary(samples), results


async def measure_async(calls: Sequence[Callable[[], Awaitable[Any]]]) -> tuple[dict[str, float], list[Any]]:
    samples, results = [], []
    for call in calls:
        started = time.perf_counter()
        results.append(await call())
        samples.append((time.perf_counter() - started) * 1000)
    return summary(samples), results
