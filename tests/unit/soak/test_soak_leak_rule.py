"""The soak's leak rule (scripts/soak/leaks.py): leaks fail, restarts neither hide nor fake
one, and a run too short to judge never passes."""

from __future__ import annotations

from scripts.soak.leaks import MIN_WINDOW_SAMPLES, Bound, Sample, judge

MIB = 1024 * 1024
RSS = Bound("rss", ceiling=1024 * MIB, slack=32 * MIB, relative_slack=0.1)
CONTAINERS = Bound("containers", ceiling=8, slack=1, per_process=False)
STORED = Bound("stored", ceiling=100, slack=0, per_process=False, trend=False)


def _samples(metric: str, epochs: list[list[float]]) -> list[Sample]:
    """Samples every 5 s; each inner list is one server lifetime."""
    samples, at = [], 0.0
    for epoch, series in enumerate(epochs):
        for value in series:
            samples.append(Sample(at, epoch, {metric: value}))
            at += 5
    return samples


def _warm_then_flat(start: float, plateau: float, n: int = 30) -> list[float]:
    """Fast warm-up over the first few samples, then a plateau with a little noise."""
    return [
        start + (plateau - start) * min(1.0, i / 6) + (MIB if i % 2 else -MIB) for i in range(n)
    ]


def test_a_steady_leak_fails() -> None:
    leaking = [80 * MIB + i * 4 * MIB for i in range(60)]
    findings = judge(_samples("rss", [leaking]), [RSS])
    assert [f.kind for f in findings] == ["growth"]
    assert findings[0].detail.startswith("epoch 0:")


def test_a_sawtooth_of_restarts_passes() -> None:
    # Each lifetime warms up from a fresh process and levels off; each restart resets it.
    lifetimes = [_warm_then_flat(60 * MIB, 140 * MIB) for _ in range(4)]
    assert judge(_samples("rss", lifetimes), [RSS]) == []


def test_a_whole_run_view_would_be_fooled_by_the_same_sawtooth() -> None:
    # Taken as one window, each restart resets the leak, so the thirds look alike and the
    # leak is invisible; per lifetime, it shows in every epoch.
    leaking = [[80 * MIB + i * 8 * MIB for i in range(30)] for _ in range(3)]
    per_epoch = judge(_samples("rss", leaking), [RSS])
    assert [f.kind for f in per_epoch] == ["growth"] * 3
    whole_run = Bound("rss", ceiling=RSS.ceiling, slack=RSS.slack, per_process=False)
    assert judge(_samples("rss", leaking), [whole_run]) == []


def test_what_each_crash_leaves_behind_accumulates_across_restarts() -> None:
    # An orphan container per crash, never removed: flat within a lifetime, but growing
    # over the run.
    epochs = [[epoch + float(i % 2) for i in range(10)] for epoch in range(6)]
    findings = judge(_samples("containers", epochs), [CONTAINERS])
    assert [f.kind for f in findings] == ["growth"]


def test_containers_coming_and_going_with_the_load_pass() -> None:
    busy = [[float(i % 3) for i in range(12)] for _ in range(5)]
    assert judge(_samples("containers", busy), [CONTAINERS]) == []


def test_a_peak_over_the_ceiling_fails_even_when_flat() -> None:
    findings = judge(_samples("rss", [[2048.0 * MIB] * 30]), [RSS])
    assert [f.kind for f in findings] == ["ceiling"]


def test_data_kept_by_design_is_held_to_its_ceiling_only() -> None:
    growing = [float(i) for i in range(50)]
    assert judge(_samples("stored", [growing]), [STORED]) == []
    findings = judge(_samples("stored", [[*growing, 101.0]]), [STORED])
    assert [f.kind for f in findings] == ["ceiling"]


def test_a_run_too_short_to_judge_does_not_pass() -> None:
    short = [[100.0 * MIB] * (MIN_WINDOW_SAMPLES - 1)] * 3
    findings = judge(_samples("rss", short), [RSS])
    assert [f.kind for f in findings] == ["unjudged"]
    # One long enough lifetime is enough; the short ones around it are not judged.
    mixed = [*short, _warm_then_flat(60 * MIB, 140 * MIB)]
    assert judge(_samples("rss", mixed), [RSS]) == []
