"""Forkhorse reviews itself: this repository's own commit, its own `.forkhorse/checks`
(the brand.js quick check, then the large-files and brand full checks in the real default
image)."""

from __future__ import annotations

from pathlib import Path

from dulwich.repo import Repo

from tests.support.runner import PROJECT, World

ROOT = Path(__file__).resolve().parents[3]


def test_this_repository_passes_its_own_checks(world: World, default_ref: str) -> None:
    world.runtime.images.record("default", default_ref)
    store = world.runtime.git.store(PROJECT)
    with Repo(str(ROOT)) as repo:  # the checkout under test; CI runs in a git clone
        head = repo.head().decode()
        store.objects.add_objects([(repo.object_store[sha], None) for sha in repo.object_store])
    run = world.review_commit(head)
    world.run(run)
    record = world.record(run.review_id)
    assert [(c.name, c.outcome) for c in record.checks] == [
        ("brand-quick", "passed"),
        ("large-files", "passed"),
        ("brand", "passed"),
    ], [c.message for c in record.checks]
    assert record.evidence == "mixed"
    assert record.checks[0].definition["module"] == ".forkhorse/quick/brand.js"
    assert record.checks[1].stdout.text == "No file of 10000000 bytes or more.\n"
    assert record.checks[2].stdout.text == "Checked brand.json.\n"
