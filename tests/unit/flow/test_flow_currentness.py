"""Currentness over hostile lineages: cycles, missing parents, duplicate tips, dropped findings."""

from __future__ import annotations

from typing import Any

import pytest
from forkhorse.flow.currentness import Selection, select_current
from forkhorse.flow.ids import finding_id

from tests.unit.flow.flow_factories import (
    HEAD,
    OTHER_HEAD,
    chain,
    container,
    item,
    receipt,
    root,
    successor,
)


def select(*containers: dict[str, Any], head: str = HEAD, **filters: str) -> Selection:
    receipts = [receipt(c, mode=c["backend"]) for c in containers]
    return select_current(
        receipts,
        head_sha=head,
        review_kind=filters.get("kind", "implementation"),
        backend=filters.get("backend", "codex"),
    )


def test_linear_chain_selects_the_tip_and_only_its_statuses() -> None:
    gen1, gen2, gen3 = chain(3, 4)
    gen3["items"][0]["status"] = "fixed"
    selection = select(gen1, gen3, gen2)
    assert selection.status == "current"
    assert selection.tip is gen3
    assert selection.chain == ("gen-3", "gen-2", "gen-1")
    assert [i["status"] for i in selection.tip["items"]] == ["fixed"] + ["not_fixed"] * 3


def test_new_findings_in_a_successor_are_first_seen_there() -> None:
    gen1 = root("g1", 2)
    gen2 = successor(gen1, "g2", new=2)
    assert select(gen1, gen2).tip is gen2


def test_two_cycle_is_never_current() -> None:
    first = container("a", [], round_number=2, supersedes="b")
    second = container("b", [], round_number=2, supersedes="a")
    selection = select(first, second)
    assert selection.status == "unsupported"
    assert selection.tip is None


def test_three_cycle_and_self_loop_are_never_current() -> None:
    ring = [
        container("a", [], round_number=2, supersedes="c"),
        container("b", [], round_number=3, supersedes="a"),
        container("c", [], round_number=4, supersedes="b"),
    ]
    assert select(*ring).status == "unsupported"
    assert select(container("a", [], round_number=2, supersedes="a")).status == "unsupported"


def test_missing_parent_fails_the_whole_selection() -> None:
    gen1, gen2 = chain(2, 2)
    orphan = successor(gen2, "orphan", head=OTHER_HEAD)
    selection = select(gen1, orphan)  # gen-2 (its parent) is missing
    assert (selection.status, selection.rule) == ("unsupported", "lineage.missing-parent")


def test_duplicate_head_tips_are_ambiguous() -> None:
    gen1 = root("g1", 2)
    left = successor(gen1, "left")
    right = successor(gen1, "right")
    selection = select(gen1, left, right)
    assert (selection.status, selection.rule) == ("ambiguous", "lineage.multiple-tips")


def test_a_duplicate_tip_at_another_head_does_not_block_the_current_one() -> None:
    gen1 = root("g1", 2)
    current = successor(gen1, "current")
    stale = successor(gen1, "stale", head=OTHER_HEAD)
    assert select(gen1, current, stale).tip is current


def test_dropped_finding_invalidates_the_chain() -> None:
    gen1, gen2, gen3 = chain(3, 3)
    del gen3["items"][1]
    selection = select(gen1, gen2, gen3)
    assert (selection.status, selection.rule) == ("unsupported", "lineage.incomplete-snapshot")


def test_dropped_finding_deep_in_the_chain_is_found() -> None:
    generations = chain(5, 3)
    del generations[1]["items"][0]
    for later in generations[2:]:
        del later["items"][0]  # consistently missing from gen-2 onwards
    selection = select(*generations)
    assert selection.rule == "lineage.incomplete-snapshot"


def test_reused_first_seen_id_for_a_new_finding_is_rejected() -> None:
    gen1 = root("g1", 2)
    gen2 = successor(gen1, "g2")
    gen2["items"].append(item("g1", 3, "g2"))  # claims g1 first saw it; g1 never had it
    selection = select(gen1, gen2)
    assert (selection.status, selection.rule) == ("unsupported", "lineage.first-seen")


def test_root_items_must_be_first_seen_in_the_root() -> None:
    gen1 = container("g1", [item("g0", 1, "g1")])
    assert select(gen1).rule == "lineage.first-seen"


def test_carried_finding_cannot_change_its_first_seen() -> None:
    gen1 = root("g1", 1)
    gen2 = successor(gen1, "g2")
    gen2["items"][0] = item("g2", 1, "g2")  # same ordinal, re-derived as if first seen in g2
    selection = select(gen1, gen2)
    assert selection.status == "unsupported"
    assert selection.rule in {"lineage.incomplete-snapshot", "lineage.first-seen"}


def test_a_prior_finding_edge_adds_a_new_item_beside_the_carried_one() -> None:
    """What the reference writes for a `Prior finding ID` line: A carried, X names A."""
    gen1 = root("g1", 2)
    gen2 = successor(gen1, "g2")
    older = gen2["items"][0]["id"]
    gen2["items"].append(item("g2", 3, "g2", priorFindingId=older))
    selection = select(gen1, gen2)
    assert selection.tip is gen2
    assert {i["id"] for i in selection.tip["items"]} >= {older, finding_id("g2", 3)}


def test_dropping_a_finding_and_naming_it_from_a_new_one_is_an_incomplete_snapshot() -> None:
    gen1 = root("g1", 2)
    gen2 = successor(gen1, "g2")
    dropped = gen2["items"].pop(0)
    gen2["items"].append(item("g2", 3, "g2", priorFindingId=dropped["id"]))
    selection = select(gen1, gen2)
    assert (selection.status, selection.rule) == ("unsupported", "lineage.incomplete-snapshot")
    assert selection.tip is None


def test_a_replacement_edge_carries_forward_with_its_item() -> None:
    gen1 = root("g1", 1)
    gen2 = successor(gen1, "g2")
    older = gen2["items"][0]["id"]
    gen2["items"].append(item("g2", 2, "g2", priorFindingId=older))
    gen3 = successor(gen2, "g3")  # the new item keeps its id and its edge
    assert select(gen1, gen2, gen3).tip is gen3


def test_two_items_replacing_one_finding_is_duplicate_ownership() -> None:
    gen1 = root("g1", 2)
    gen2 = successor(gen1, "g2")
    older = gen2["items"][0]["id"]
    gen2["items"] += [
        item("g2", 3, "g2", priorFindingId=older),
        item("g2", 4, "g2", priorFindingId=older),
    ]
    assert select(gen1, gen2).rule == "lineage.duplicate-owner"


def test_a_later_generation_cannot_replace_a_finding_again() -> None:
    gen1 = root("g1", 1)
    gen2 = successor(gen1, "g2")
    older = gen2["items"][0]["id"]
    gen2["items"].append(item("g2", 2, "g2", priorFindingId=older))
    gen3 = successor(gen2, "g3")
    gen3["items"].append(item("g3", 3, "g3", priorFindingId=older))
    assert select(gen1, gen2, gen3).rule == "lineage.duplicate-owner"


def test_prior_finding_must_name_an_item_of_an_earlier_generation() -> None:
    gen1 = root("g1", 2)
    gen2 = successor(gen1, "g2")
    gen2["items"].append(item("g2", 3, "g2", priorFindingId="finding-elsewhere"))
    assert select(gen1, gen2).rule == "lineage.prior-unknown"
    sibling = successor(gen1, "g2")
    sibling["items"] += [
        item("g2", 3, "g2"),
        item("g2", 4, "g2", priorFindingId=finding_id("g2", 3)),  # names a new sibling
    ]
    assert select(gen1, sibling).rule == "lineage.prior-unknown"


def test_a_dropped_finding_cannot_come_back_later() -> None:
    gen1 = root("g1", 2)
    gen2 = successor(gen1, "g2")
    dropped = gen2["items"].pop(0)
    gen3 = successor(gen2, "g3")
    gen3["items"].insert(0, {**dropped, "lastSeenReceiptId": "g3"})
    assert select(gen1, gen2, gen3).rule == "lineage.incomplete-snapshot"


def test_tip_at_another_head_is_stale_not_absent() -> None:
    gen1 = root("g1", 2)
    gen2 = successor(gen1, "g2", head=OTHER_HEAD)
    selection = select(gen1, gen2)
    assert (selection.status, selection.stale_tips) == ("stale", ("g2",))


def test_filters_ignore_other_kinds_and_backends() -> None:
    mine = root("mine", 1)
    plan = root("plan", 1, kind="plan")
    copilot = root("copilot", 1, backend="copilot")
    receipts = [
        receipt(mine),
        receipt(plan, type="plan_review"),
        receipt(copilot, mode="copilot"),
    ]
    selection = select_current(
        receipts, head_sha=HEAD, review_kind="implementation", backend="codex"
    )
    assert selection.tip is mine
    selection = select_current(receipts, head_sha=HEAD, review_kind="qa", backend="codex")
    assert selection.status == "absent"


def test_legacy_receipts_without_findings_are_absent_not_a_pass() -> None:
    selection = select_current(
        [receipt(None), {"findings": None}],
        head_sha=HEAD,
        review_kind="implementation",
        backend="codex",
    )
    assert (selection.status, selection.tip) == ("absent", None)


@pytest.mark.parametrize("candidate", [None, [], "receipt", 3, {"findings": []}, {"findings": {}}])
def test_any_malformed_candidate_makes_the_set_unsupported(candidate: object) -> None:
    selection = select_current(
        [receipt(root("g1", 1)), candidate],
        head_sha=HEAD,
        review_kind="implementation",
        backend="codex",
    )
    assert selection.status == "unsupported"
    assert selection.pointer is not None
    assert selection.pointer.startswith("/1")


def test_receipt_binding_mismatch_is_unsupported() -> None:
    bad = receipt(root("g1", 1), mode="copilot")
    selection = select_current([bad], head_sha=HEAD, review_kind="implementation", backend="codex")
    assert (selection.status, selection.rule) == ("unsupported", "binding.mode-backend")


def test_generations_are_never_merged_with_a_stale_sibling() -> None:
    gen1 = root("g1", 2)
    current = successor(gen1, "current", status="open")
    stale = successor(gen1, "stale", new=3, head=OTHER_HEAD, status="fixed")
    selection = select(gen1, current, stale)
    assert selection.tip is current
    assert {i["status"] for i in selection.tip["items"]} == {"open"}
    assert len(selection.tip["items"]) == 2
