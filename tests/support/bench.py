"""The figures of `make bench`: what each is, its target, and what a run measured.
tests/bench/conftest.py hands benchmarks the run's `BenchFigures` and prints the table."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Target:
    what: str
    at_most: float
    unit: str  # "x" for a ratio against a bare baseline measured in the same run


TARGETS = {
    "record": Target("Serialize, digest, chunk a 4.21 MiB record / sha256 alone", 1.5, "x"),
    "receipt": Target("Quick + full receipt / bare python start + bare podman run", 1.5, "x"),
    "quick-check": Target("One .py quick check / a bare interpreter start", 1.5, "x"),
    "state-ratio": Target("GET /state, 1,000 reviews / Store.list_reviews alone", 1.5, "x"),
    "state-ms": Target("GET /state, 1,000 reviews", 20.0, "ms"),
    "throughput": Target("20 reviews at once / the same 80 checks run bare", 1.3, "x"),
    "image-warm": Target("Default image, built with a warm package cache", 60.0, "s"),
    "image-reuse": Target("Default image again, an identical one already in podman", 5.0, "s"),
    "pytest-startup": Target("A pytest session of tests/unit/gate, CPU", 2.0, "s"),
    "log-append": Target(
        "Log append + signed checkpoint / the record's put and signing before it", 3.0, "x"
    ),
    "log-size": Target("Transparency log (tiles + ledger rows) per 1,000 receipts", 1024.0, "KiB"),
    "cli-startup": Target(
        "forkhorse status --help, git-credential get / bare python, CPU", 6.0, "x"
    ),
}


@dataclass
class BenchFigures:
    measured: dict[str, float] = field(default_factory=dict)

    def record(self, key: str, value: float) -> None:
        """Record one bench figure (a key of TARGETS) for the closing table."""
        if key not in TARGETS:
            raise KeyError(f"{key} is not a bench figure: add its target to TARGETS")
        self.measured[key] = value

    def table(self) -> list[str]:
        """Every figure, measured or not, as aligned text rows."""
        rows = [("Figure", "Measured", "Target", "Meets?")]
        rows += [self._row(key, target) for key, target in TARGETS.items()]
        widths = [max(len(row[column]) for row in rows) for column in range(4)]
        lines = [
            " | ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
            for row in rows
        ]
        lines.insert(1, "-+-".join("-" * width for width in widths))
        return lines

    def _row(self, key: str, target: Target) -> tuple[str, str, str, str]:
        goal = f"<= {target.at_most:g} {target.unit}"
        if key not in self.measured:
            return target.what, "not run", goal, "-"
        value = self.measured[key]
        return (
            target.what,
            f"{value:.2f} {target.unit}",
            goal,
            "yes" if value <= target.at_most else "NO",
        )
