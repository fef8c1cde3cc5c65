"""Currentness: which structured findings are current for a review head.

The five steps of the contract, in order:
1. validate every candidate (one invalid candidate makes the whole set unsupported), then filter
   to the requested reviewKind and backend;
2. require unique sourceReceiptId values;
3. require every supersedesReceiptId parent in the same lineage, exactly one round lower;
4. select the unsuperseded tips whose headSha is the review head: exactly one must remain;
5. walk that tip's ancestors and reject cycles, incomplete snapshots, duplicate replacement
   ownership, duplicate finding identities and invalid first-seen references.

Generations are never merged: a current result exposes the tip's items and nothing else.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from forkhorse.flow.envelope import check_findings_binding
from forkhorse.flow.rules import RuleViolation, pointer

Status = Literal["current", "stale", "unsupported", "ambiguous", "absent"]
Container = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Selection:
    """The outcome of a selection. Only `current` carries a tip and makes its items current."""

    status: Status
    reason: str
    tip: Container | None = None
    chain: tuple[str, ...] = ()  # sourceReceiptIds from the tip back to the root
    stale_tips: tuple[str, ...] = ()
    rule: str | None = None
    pointer: str | None = None
    candidates: tuple[Container, ...] = field(default=(), repr=False)

    @property
    def current(self) -> bool:
        return self.status == "current"


class _LineageError(Exception):
    def __init__(self, status: Status, rule: str, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.rule = rule
        self.reason = reason


def select_current(
    receipts: Iterable[object], *, head_sha: str, review_kind: str, backend: str
) -> Selection:
    """Apply the five steps to candidate receipts; never raises on any JSON-like input."""
    try:
        containers = _validated_containers(receipts)
    except RuleViolation as violation:
        return Selection(
            "unsupported",
            f"invalid candidate: {violation}",
            rule=violation.rule,
            pointer=violation.pointer,
        )
    lineage = tuple(
        c for c in containers if c["reviewKind"] == review_kind and c["backend"] == backend
    )
    if not lineage:
        return Selection("absent", "no structured findings for this review kind and backend")
    try:
        return _select(lineage, head_sha)
    except _LineageError as error:
        return Selection(error.status, error.reason, rule=error.rule, candidates=lineage)


def _validated_containers(receipts: Iterable[object]) -> list[Container]:
    containers: list[Container] = []
    for index, receipt in enumerate(receipts):
        if not isinstance(receipt, Mapping):
            raise RuleViolation("receipt.type", pointer(index), "must be a JSON object")
        try:
            container = check_findings_binding(receipt, bare=True)
        except RuleViolation as violation:
            raise RuleViolation(
                violation.rule, pointer(index) + violation.pointer, violation.message
            ) from None
        if container is not None:
            containers.append(container)
    return containers


def _select(lineage: Sequence[Container], head_sha: str) -> Selection:
    by_id = _unique_by_source(lineage)
    _check_parents(lineage, by_id)
    superseded = {c["supersedesReceiptId"] for c in lineage if "supersedesReceiptId" in c}
    tips = [c for c in lineage if c["sourceReceiptId"] not in superseded]
    head_tips = [c for c in tips if c["headSha"] == head_sha]
    if len(head_tips) > 1:
        raise _LineageError("ambiguous", "lineage.multiple-tips", "several tips at the review head")
    if not head_tips:
        if not tips:
            raise _LineageError("unsupported", "lineage.cycle", "every generation is superseded")
        stale = tuple(sorted(c["sourceReceiptId"] for c in tips))
        return Selection(
            "stale", "no tip at the review head", stale_tips=stale, candidates=tuple(lineage)
        )
    tip = head_tips[0]
    chain = _walk_chain(tip, by_id)
    return Selection(
        "current",
        "one tip at the review head",
        tip=tip,
        chain=tuple(c["sourceReceiptId"] for c in chain),
        candidates=tuple(lineage),
    )


def _unique_by_source(lineage: Sequence[Container]) -> dict[str, Container]:
    by_id: dict[str, Container] = {}
    for container in lineage:
        source = container["sourceReceiptId"]
        if source in by_id:
            raise _LineageError("ambiguous", "lineage.duplicate-source", f"{source} appears twice")
        by_id[source] = container
    return by_id


def _check_parents(lineage: Sequence[Container], by_id: Mapping[str, Container]) -> None:
    for container in lineage:
        if "supersedesReceiptId" not in container:
            continue
        parent = by_id.get(container["supersedesReceiptId"])
        if parent is None:
            raise _LineageError(
                "unsupported",
                "lineage.missing-parent",
                f"{container['sourceReceiptId']} supersedes a missing generation",
            )
        if parent["round"] != container["round"] - 1:
            raise _LineageError(
                "unsupported",
                "lineage.round-gap",
                f"{container['sourceReceiptId']} is not one round after its parent",
            )


def _walk_chain(tip: Container, by_id: Mapping[str, Container]) -> list[Container]:
    """Tip-to-root chain, verifying every snapshot against its ancestors."""
    chain = [tip]
    visited = {tip["sourceReceiptId"]}
    while "supersedesReceiptId" in chain[-1]:
        parent = by_id[chain[-1]["supersedesReceiptId"]]
        if parent["sourceReceiptId"] in visited:
            raise _LineageError("unsupported", "lineage.cycle", "the supersedes chain loops")
        visited.add(parent["sourceReceiptId"])
        chain.append(parent)
    walk = _ChainWalk()
    for generation in reversed(chain):
        walk.check(generation)
    return chain


@dataclass(slots=True)
class _ChainWalk:
    """Finding-lineage state accumulated from the root down the selected chain.

    Carrying is by id alone: every known finding must reappear in each later generation.
    A `priorFindingId` is an extra edge from a new item to an older one; it never stands in
    for the older item, and each older item has at most one replacement in the chain.
    """

    known: set[str] = field(default_factory=set)  # finding ids of the generations walked
    sources: set[str] = field(default_factory=set)  # sourceReceiptIds walked, this one included
    replaced_by: dict[str, str] = field(default_factory=dict)  # priorFindingId -> its owner

    def check(self, generation: Container) -> None:
        source = generation["sourceReceiptId"]
        self.sources.add(source)
        ids = {item["id"] for item in generation["items"]}
        missing = self.known - ids
        if missing:
            raise _LineageError(
                "unsupported", "lineage.incomplete-snapshot", f"{source} drops {min(missing)}"
            )
        for item in generation["items"]:  # `known` holds the older generations' ids until after
            self._check_identity(item, source)
            if "priorFindingId" in item:
                self._check_edge(item, source)
        self.known |= ids

    def _check_identity(self, item: Container, source: str) -> None:
        first_seen = item["firstSeenReceiptId"]
        if first_seen not in self.sources:
            raise _LineageError(
                "unsupported", "lineage.first-seen", f"{item['id']} names a receipt off the chain"
            )
        if item["id"] in self.known:
            if first_seen == source:
                raise _LineageError(
                    "unsupported",
                    "lineage.duplicate-identity",
                    f"{item['id']} is carried but claims to be first seen in {source}",
                )
        elif first_seen != source:
            raise _LineageError(
                "unsupported", "lineage.first-seen", f"{item['id']} is new but not first seen here"
            )

    def _check_edge(self, item: Container, source: str) -> None:
        prior = item["priorFindingId"]
        if prior not in self.known:
            raise _LineageError(
                "unsupported",
                "lineage.prior-unknown",
                f"{item['id']} names {prior}, which no earlier generation holds",
            )
        owner = self.replaced_by.setdefault(prior, item["id"])
        if owner != item["id"]:
            raise _LineageError(
                "unsupported",
                "lineage.duplicate-owner",
                f"{prior} is replaced by both {owner} and {item['id']} in {source}",
            )
