"""`make bench`'s closing table: every figure, measured or not, against its target."""

import pytest

from tests.support.bench import TARGETS, BenchFigures


def test_the_table_lists_every_figure_and_says_which_meet_their_target() -> None:
    figures = BenchFigures()
    figures.record("record", 1.25)
    figures.record("state-ms", 56.6)
    rows = {line.split(" | ")[0].strip(): line for line in figures.table()[2:]}
    assert set(rows) == {target.what for target in TARGETS.values()}
    cells = [cell.strip() for cell in rows[TARGETS["record"].what].split(" | ")[1:]]
    assert cells == ["1.25 x", "<= 1.5 x", "yes"]
    assert rows[TARGETS["state-ms"].what].rstrip().endswith("| NO")
    assert "not run" in rows[TARGETS["throughput"].what]


def test_a_figure_without_a_target_is_refused() -> None:
    with pytest.raises(KeyError, match="not a bench figure"):
        BenchFigures().record("made-up", 1.0)
