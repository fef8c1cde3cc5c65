"""The soak's leak rule: a pure function of the samples, so it is unit-tested on its own.

A metric "grows without bound" when either
1. any sample passes the metric's hard ceiling, or
2. in a window of samples, the median of the last third exceeds the median of the middle
   third by more than the metric's slack (an absolute amount plus a fraction of the middle
   median). The first third of each window is warm-up (caches filling, pools opening) and
   is not compared; medians ignore the bursts that come and go with the load, while a leak
   raises every sample after it.

Windows are restart-normalised. A metric of the server process itself (RSS, open files,
threads) restarts from nothing after a `kill -9`, so each server lifetime (an epoch) is
its own window: a restart can neither hide a leak (each lifetime must be flat after
warm-up) nor fake one (a fresh, small process is never compared with an old one). A
metric that outlives the process (containers, left-over processes, scratch disk) is one
window over the whole run, so what each crash leaves behind accumulates and is caught.

A window shorter than `MIN_WINDOW_SAMPLES` is not judged; a metric with a trend rule but
no judged window at all is a finding too, so a run too short to tell never passes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from statistics import median

MIN_WINDOW_SAMPLES = 9


@dataclass(frozen=True)
class Sample:
    at: float  # seconds since the soak started
    epoch: int  # which server lifetime: 0, then one more after each restart
    values: Mapping[str, float]


@dataclass(frozen=True)
class Bound:
    metric: str
    ceiling: float
    slack: float  # growth always allowed, in the metric's unit
    relative_slack: float = 0.0  # plus this fraction of the middle third's median
    per_process: bool = True  # resets when the server restarts: one window per epoch
    trend: bool = True  # False: only the ceiling applies (data kept by design)


@dataclass(frozen=True)
class Finding:
    metric: str
    kind: str  # "ceiling", "growth" or "unjudged"
    detail: str


def _windows(samples: Sequence[Sample], bound: Bound) -> list[list[float]]:
    if not bound.per_process:
        return [[s.values[bound.metric] for s in samples if bound.metric in s.values]]
    by_epoch: dict[int, list[float]] = {}
    for sample in samples:
        if bound.metric in sample.values:
            by_epoch.setdefault(sample.epoch, []).append(sample.values[bound.metric])
    return [by_epoch[epoch] for epoch in sorted(by_epoch)]


def window_growth(series: Sequence[float]) -> tuple[float, float] | None:
    """(growth, middle median): the last third's median minus the middle third's; None
    when the window is too short to judge."""
    if len(series) < MIN_WINDOW_SAMPLES:
        return None
    third = len(series) // 3
    middle = median(series[third : 2 * third])
    last = median(series[len(series) - third :])
    return last - middle, middle


def judge_metric(samples: Sequence[Sample], bound: Bound) -> list[Finding]:
    findings: list[Finding] = []
    values = [s.values[bound.metric] for s in samples if bound.metric in s.values]
    if values and max(values) > bound.ceiling:
        findings.append(
            Finding(bound.metric, "ceiling", f"peak {max(values):g} > ceiling {bound.ceiling:g}")
        )
    if not bound.trend:
        return findings
    judged = 0
    for index, series in enumerate(_windows(samples, bound)):
        measured = window_growth(series)
        if measured is None:
            continue
        judged += 1
        growth, middle = measured
        allowed = bound.slack + bound.relative_slack * max(middle, 0.0)
        if growth > allowed:
            where = f"epoch {index}" if bound.per_process else "the run"
            findings.append(
                Finding(
                    bound.metric,
                    "growth",
                    f"{where}: last third {growth:+g} over the middle third (allowed {allowed:g})",
                )
            )
    if judged == 0:
        findings.append(
            Finding(bound.metric, "unjudged", f"no window of {MIN_WINDOW_SAMPLES}+ samples")
        )
    return findings


def judge(samples: Sequence[Sample], bounds: Iterable[Bound]) -> list[Finding]:
    """Every finding over every bounded metric; an empty list means no leak."""
    return [finding for bound in bounds for finding in judge_metric(samples, bound)]
