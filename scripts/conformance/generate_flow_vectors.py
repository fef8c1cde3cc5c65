#!/usr/bin/env python3
"""Differential vectors: run the reference Flow-Next (flowctl.py 4.4.0) on generated inputs and
store what it answered, so `tests/unit/flow/test_flow_reference_differential.py` can replay
them against Forkhorse without the reference.

    python scripts/conformance/generate_flow_vectors.py [--reference DIR] [--out DIR]

The reference (MIT, gmickel/flow-next) is an oracle only: it is loaded in-process from
`--reference` (default `../shared/conformance/flow-next/reference` beside the checkout) and
none of its code is copied. Inputs come from hypothesis under fixed seeds, so a rerun with
the same hypothesis version writes byte-identical files (hypothesis also draws on the
constants of this file, so editing it may change the generated half). It writes, under `--out`:

- `container-validation.json`: findings containers and receipt envelopes, a grid of single
  changes to one valid container and hypothesis-generated (mostly mutated) ones, with the
  reference's `_review_findings_container_valid` and `validate_review_receipt_findings`;
- `currentness.json`: generated lineages (carried, dropped, re-added and replaced findings,
  `priorFindingId` edges, forks, gaps) and `select_current_review_findings`' tip;
- `finding-ids.json`: finding ids and sourceReceiptIds over arbitrary (non-ASCII) text;
- `green-receipts.json`: green receipts and `_gate_receipt_valid`'s decision at a fixed now.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import importlib.util
import json
import random
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta, tzinfo
from pathlib import Path
from types import ModuleType
from typing import Any

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_REFERENCE = ROOT.parent / "shared" / "conformance" / "flow-next" / "reference"
DEFAULT_OUT = ROOT / "tests" / "conformance" / "flow-next" / "generated"
REFERENCE = "flowctl.py of gmickel/flow-next 4.4.0"

SEEDS = {"validation": 1601, "currentness": 1602, "ids": 1603, "green": 1604}
COUNTS = {"validation": 240, "currentness": 150, "ids": 160, "green": 200}

KINDS = ("plan", "implementation", "completion", "qa")
TYPE_BY_KIND = {
    "plan": "plan_review",
    "implementation": "impl_review",
    "completion": "completion_review",
    "qa": "qa_verdict",
}
BACKENDS = ("codex", "copilot", "cursor", "claude", "host", "rp", "ralph")
SEVERITIES = ("P0", "P1", "P2", "P3")
CONFIDENCES = (0, 25, 50, 75, 100)
CLASSIFICATIONS = ("introduced", "pre_existing")
STATUSES = ("open", "fixed", "not_fixed", "withdrawn")
HEAD = "b" * 40
BASE = "a" * 40
OTHER_HEAD = "c" * 40

# The green decision is taken at this instant (the reference reads its clock; it is frozen).
GREEN_NOW = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)
GREEN_HEAD = "0123456789abcdef0123456789abcdef01234567"
GREEN_GATE = "unittest"

Case = dict[str, Any]


# --- the reference -------------------------------------------------------------------------


def load_reference(folder: Path) -> ModuleType:
    """flowctl.py in-process, with its clock frozen at GREEN_NOW."""
    sys.path.insert(0, str(folder))
    spec = importlib.util.spec_from_file_location("flowctl_reference", folder / "flowctl.py")
    if spec is None or spec.loader is None:
        raise SystemExit(f"no flowctl.py in {folder}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    class FrozenDatetime(datetime):
        @classmethod
        def now(cls, tz: tzinfo | None = None) -> FrozenDatetime:
            moment = GREEN_NOW if tz is None else GREEN_NOW.astimezone(tz)
            frozen = cls.fromisoformat(moment.isoformat())
            return frozen if tz is not None else frozen.replace(tzinfo=None)

    module.datetime = FrozenDatetime
    return module


def answer(call: Callable[[], Any]) -> Any:
    """What the reference answered, or `{"raised": <exception type>}` when it crashed."""
    try:
        return call()
    except Exception as error:  # the oracle's crash is an answer too: it is never a pass
        return {"raised": type(error).__name__}


# --- running a strategy under a fixed seed -------------------------------------------------


def collect(strategy: st.SearchStrategy[Any], count: int, fixed_seed: int) -> list[Any]:
    """Up to `count` distinct examples of `strategy`, the same ones on every run."""
    found: dict[str, Any] = {}

    @seed(fixed_seed)
    @settings(
        max_examples=3 * count,  # hypothesis repeats itself; the first `count` distinct are kept
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def run(value: Any) -> None:
        found.setdefault(json.dumps(value, sort_keys=True, ensure_ascii=False), value)

    run()
    return list(found.values())[:count]


TEXT = st.characters(exclude_categories=("Cs",))  # any code point UTF-8 can carry
ids = st.text(TEXT, min_size=1, max_size=10)


# --- findings containers ---------------------------------------------------------------------

path_segments = st.text(st.sampled_from("abcxyz019_-.é"), min_size=1, max_size=6).filter(
    lambda s: s not in (".", "..")
)
SAFE_PATHS = st.lists(path_segments, min_size=1, max_size=3).map("/".join)
ODD_PATH_VALUES = (
    "C:/x/a.py",
    "c:/a.py",
    "C:a.py",
    "a\\b.py",
    "C:\\x\\a.py",
    " a.py",
    "a.py ",
    "`src/a.py`",
    "**src/a.py**",
    "a\0b.py",
    "/abs.py",
    "../x.py",
    "a/../b.py",
    "./a.py",
    "a/./b.py",
    "a//b.py",
    "a/",
    ".",
    "",
    "a\tb.py",
    "src/é/ß.py",
    "x" * 1024,
    "x" * 1025,
)
ODD_PATHS = st.sampled_from(ODD_PATH_VALUES)
R_IDS = st.sampled_from(["R1", "R2", "R10", "R0", "R01", "R007", "R123456"])
ODD_R_ID_VALUES = (
    "R\u0663",
    "R\uff11",
    "r1",
    "R",
    "R1 ",
    " R1",
    "R-1",
    "G1",
    "R1.0",
    "R" + "1" * 160,
)
ODD_R_IDS = st.sampled_from(ODD_R_ID_VALUES)
# Every key of the grid's base container is set to each of these in turn (and deleted).
GRID_VALUES = (None, True, 0, -1, 1.0, "", [], {}, "P1", 76, "Major", "x" * 161)
SHAS = st.sampled_from([HEAD, BASE, "deadbeef", "HEAD", "b" * 160, "é" * 5])
HOSTILE = st.sampled_from(
    [
        None,
        True,
        False,
        0,
        1,
        -1,
        2,
        1.0,
        2**53,
        "",
        " ",
        "x" * 161,
        [],
        {},
        ["R1"],
        "P1",
        "Major",
        "p1",
        76,
        "pre-existing",
        "resolved",
        "fixed in review",
        "Open",
        "HEAD",
        "abcdef0",
        "ABCDEF0",
        "abcdef",
        "0" * 64,
        "0" * 65,
        "implementation",
        "Implementation",
        "review",
        "left",
    ]
) | st.text(TEXT, max_size=8)


def finding_id(reference: ModuleType, first_seen: str, ordinal: int) -> str:
    return str(reference._review_finding_lineage_id(first_seen, ordinal))


@st.composite
def valid_containers(draw: st.DrawFn, reference: ModuleType) -> dict[str, Any]:
    source = draw(ids)
    container: dict[str, Any] = {
        "schemaVersion": 1,
        "sourceReceiptId": source,
        "reviewKind": draw(st.sampled_from(KINDS)),
        "backend": draw(st.sampled_from(BACKENDS)),
        "round": 1,
        "headSha": draw(SHAS),
        "items": [],
    }
    if draw(st.integers(0, 3)) > 0:
        container["baseSha"] = draw(SHAS)
    earlier = [source]
    if draw(st.booleans()):
        parent = draw(ids.filter(lambda value: value != source))
        container["supersedesReceiptId"] = parent
        container["round"] = draw(st.integers(2, 5))
        earlier.append(parent)
    ordinals = draw(st.lists(st.integers(1, 60), unique=True, max_size=3))
    for ordinal in ordinals:
        container["items"].append(draw(valid_items(reference, container, earlier, ordinal)))
    return container


@st.composite
def valid_items(
    draw: st.DrawFn,
    reference: ModuleType,
    container: dict[str, Any],
    first_seen_choices: list[str],
    ordinal: int,
) -> dict[str, Any]:
    first_seen = draw(st.sampled_from(first_seen_choices))
    own = finding_id(reference, first_seen, ordinal)
    item: dict[str, Any] = {
        "id": own,
        "ordinal": ordinal,
        "severity": draw(st.sampled_from(SEVERITIES)),
        "confidence": draw(st.sampled_from(CONFIDENCES)),
        "classification": draw(st.sampled_from(CLASSIFICATIONS)),
        "status": draw(st.sampled_from(STATUSES)),
        "title": draw(st.text(TEXT, min_size=1, max_size=12)),
        "body": draw(st.text(TEXT, min_size=1, max_size=16)),
        "rIds": draw(st.lists(R_IDS, unique=True, max_size=3)),
        "firstSeenReceiptId": first_seen,
        "lastSeenReceiptId": container["sourceReceiptId"],
    }
    if draw(st.booleans()):
        item["suggestion"] = draw(st.text(TEXT, min_size=1, max_size=12))
    if draw(st.integers(0, 3)) == 0:
        item["priorFindingId"] = draw(ids.map(lambda value: "finding-" + value))
    if "baseSha" in container and draw(st.integers(0, 4)) > 1:
        item["anchor"] = draw(anchors(container))
    return item


@st.composite
def anchors(draw: st.DrawFn, container: dict[str, Any]) -> dict[str, Any]:
    start = draw(st.integers(1, 400))
    anchor: dict[str, Any] = {
        "path": draw(SAFE_PATHS),
        "side": draw(st.sampled_from(("base", "head"))),
        "startLine": start,
        "baseSha": container["baseSha"],
        "headSha": container["headSha"],
    }
    if draw(st.booleans()):
        anchor["endLine"] = start + draw(st.integers(0, 20))
    if draw(st.integers(0, 3)) == 0:
        anchor["originalPath"] = draw(SAFE_PATHS)
    if draw(st.integers(0, 3)) == 0:
        anchor["blobOid"] = draw(
            st.text(st.sampled_from("0123456789abcdef"), min_size=7, max_size=64)
        )
    return anchor


# The contract's key names, spelled out rather than imported: the generator must not take its
# inputs from the implementation it checks.
CONTAINER_KEYS = (
    "schemaVersion",
    "sourceReceiptId",
    "reviewKind",
    "backend",
    "round",
    "headSha",
    "baseSha",
    "supersedesReceiptId",
    "items",
)
ITEM_KEYS = (
    "id",
    "ordinal",
    "severity",
    "confidence",
    "classification",
    "status",
    "title",
    "body",
    "suggestion",
    "rIds",
    "firstSeenReceiptId",
    "lastSeenReceiptId",
    "priorFindingId",
    "anchor",
)
ANCHOR_KEYS = (
    "path",
    "originalPath",
    "side",
    "startLine",
    "endLine",
    "baseSha",
    "headSha",
    "blobOid",
)
BOUNDARIES = {
    "sourceReceiptId": 160,
    "backend": 160,
    "headSha": 160,
    "title": 240,
    "body": 4000,
    "suggestion": 4000,
    "priorFindingId": 160,
    "path": 1024,
}


@st.composite
def mutated(draw: st.DrawFn, container: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The container with 0-2 mutations, and their names."""
    value = copy.deepcopy(container)
    names: list[str] = []
    for _ in range(draw(st.integers(0, 2))):
        names.append(draw(mutation(value)))
    return value, names


@st.composite
def mutation(draw: st.DrawFn, container: dict[str, Any]) -> str:
    items = dict_items(container)
    anchored = [item["anchor"] for item in items if isinstance(item.get("anchor"), dict)]
    kind = draw(st.sampled_from(["field"] * 4 + ["odd-path", "odd-rid", "structural"]))
    if kind == "odd-path" and anchored:
        key = draw(st.sampled_from(["path", "originalPath"]))
        draw(st.sampled_from(anchored))[key] = draw(ODD_PATHS)
        return f"anchor.{key}.odd"
    if kind == "odd-rid" and items:
        item = draw(st.sampled_from(items))
        item["rIds"] = [*(item.get("rIds") or []), draw(ODD_R_IDS)]
        return "item.rIds.odd"
    if kind == "structural":
        return draw(structural(container)) or "unchanged"
    return draw(field_mutation(container, items, anchored))


@st.composite
def field_mutation(
    draw: st.DrawFn,
    container: dict[str, Any],
    items: list[dict[str, Any]],
    anchored: list[dict[str, Any]],
) -> str:
    targets = ["container"] + ["item"] * bool(items) + ["anchor"] * bool(anchored)
    where = draw(st.sampled_from(targets))
    if where == "container":
        target, keys = container, CONTAINER_KEYS
    elif where == "item":
        target, keys = draw(st.sampled_from(items)), ITEM_KEYS
    else:
        target, keys = draw(st.sampled_from(anchored)), ANCHOR_KEYS
    key = draw(st.sampled_from(keys))
    kind = draw(st.sampled_from(["hostile", "delete", "unknown", "boundary", "null"]))
    if kind == "boundary" and key not in BOUNDARIES:
        kind = "hostile"
    if kind == "hostile":
        target[key] = draw(HOSTILE)
    elif kind == "delete":
        target.pop(key, None)
    elif kind == "unknown":
        target[draw(st.sampled_from(["extra", "Id", "rids", "x-note"]))] = draw(HOSTILE)
    elif kind == "boundary":
        target[key] = "x" * (BOUNDARIES[key] + draw(st.integers(0, 1)))
    else:
        target[key] = None
    return f"{where}.{key}.{kind}"


@st.composite
def structural(draw: st.DrawFn, container: dict[str, Any]) -> str | None:
    items = dict_items(container)
    choice = draw(
        st.sampled_from(
            [
                "inverted",
                "duplicate-item",
                "last-seen",
                "root-round",
                "self",
                "rids",
                "binding",
                "unhashable-side",
            ]
        )
    )
    if choice == "inverted":
        for item in items:
            anchor = item.get("anchor")
            if isinstance(anchor, dict) and is_int(anchor.get("startLine")):
                anchor["endLine"] = anchor["startLine"] - 1
                return "anchor.inverted-range"
    elif choice == "duplicate-item" and items:
        container["items"].append(copy.deepcopy(items[0]))
        return "items.duplicate"
    elif choice == "last-seen" and items:
        items[-1]["lastSeenReceiptId"] = "elsewhere"
        return "item.lastSeen-elsewhere"
    elif choice == "root-round":
        container["round"] = 2 if "supersedesReceiptId" not in container else 1
        return "container.round-vs-root"
    elif choice == "self":
        container["supersedesReceiptId"] = container["sourceReceiptId"]
        return "container.supersedes-self"
    elif choice == "rids" and items:
        items[0]["rIds"] = [f"R{n}" for n in range(draw(st.sampled_from([32, 33])))]
        return "item.rIds-count"
    elif choice == "unhashable-side":
        for item in items:
            if isinstance(item.get("anchor"), dict):
                item["anchor"]["side"] = draw(st.sampled_from([[], {}, ["head"]]))
                return "anchor.side-unhashable"
    elif choice == "binding" and "baseSha" in container and items:
        anchor = draw(anchors(container))
        anchor["headSha"] = OTHER_HEAD
        items[0]["anchor"] = anchor
        return "anchor.binding"
    return None


def dict_items(container: dict[str, Any]) -> list[dict[str, Any]]:
    """The items a mutation can still reach (an earlier one may have broken the list)."""
    items = container.get("items")
    return [item for item in items if isinstance(item, dict)] if isinstance(items, list) else []


def is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@st.composite
def validation_inputs(draw: st.DrawFn, reference: ModuleType) -> Case:
    container, names = draw(mutated(draw(valid_containers(reference))))
    kind = container.get("reviewKind")
    receipt_type = TYPE_BY_KIND.get(kind) if isinstance(kind, str) else None
    envelope: dict[str, Any] = {"verdict": "NEEDS_WORK"}
    match draw(st.integers(0, 9)):
        case 0:
            envelope["type"] = draw(st.sampled_from([*TYPE_BY_KIND.values(), "review"]))
        case 1:
            pass  # no type at all
        case _:
            envelope["type"] = receipt_type or "impl_review"
    match draw(st.integers(0, 9)):
        case 0:
            envelope["mode"] = draw(st.sampled_from([*BACKENDS, "Codex"]))
        case 1:
            pass
        case _:
            envelope["mode"] = container.get("backend")
    return {"mutations": names, "container": container, "envelope": envelope}


def grid_base(reference: ModuleType) -> dict[str, Any]:
    """A valid successor whose one carried item has every optional field."""
    source, parent = "review-\u00e9-2", "review-\u00e9-1"
    return {
        "schemaVersion": 1,
        "sourceReceiptId": source,
        "reviewKind": "implementation",
        "backend": "codex",
        "round": 2,
        "baseSha": BASE,
        "headSha": HEAD,
        "supersedesReceiptId": parent,
        "items": [
            {
                "id": finding_id(reference, parent, 3),
                "ordinal": 3,
                "severity": "P1",
                "confidence": 75,
                "classification": "introduced",
                "status": "not_fixed",
                "title": "T",
                "body": "B",
                "suggestion": "S",
                "rIds": ["R1"],
                "firstSeenReceiptId": parent,
                "lastSeenReceiptId": source,
                "priorFindingId": "finding-older",
                "anchor": {
                    "path": "src/a.py",
                    "originalPath": "src/old.py",
                    "side": "head",
                    "startLine": 4,
                    "endLine": 6,
                    "baseSha": BASE,
                    "headSha": HEAD,
                    "blobOid": "abcdef0",
                },
            }
        ],
    }


def grid_inputs(reference: ModuleType) -> Iterator[Case]:
    """One change at a time to the grid's base: every key to every grid value, and deleted;
    every odd anchor path; every odd R-ID."""
    envelope = {"type": "impl_review", "mode": "codex", "verdict": "NEEDS_WORK"}

    def changed(where: str, key: str, value: Any, delete: bool = False) -> Case:
        container = grid_base(reference)
        item = container["items"][0]
        target = {"container": container, "item": item, "anchor": item["anchor"]}[where]
        if delete:
            del target[key]
        elif key == "rIds" and where == "item" and isinstance(value, str):
            target[key] = [*target[key], value]
        else:
            target[key] = value
        label = "deleted" if delete else json.dumps(value, ensure_ascii=False)[:16]
        return {
            "mutations": [f"{where}.{key}={label}"],
            "container": container,
            "envelope": envelope,
        }

    for where, keys in (
        ("container", CONTAINER_KEYS),
        ("item", ITEM_KEYS),
        ("anchor", ANCHOR_KEYS),
    ):
        for key in keys:
            yield changed(where, key, None, delete=True)
            for value in GRID_VALUES:
                yield changed(where, key, value)
    for key in ("path", "originalPath"):
        for path in ODD_PATH_VALUES:
            yield changed("anchor", key, path)
    for r_id in ODD_R_ID_VALUES:
        yield changed("item", "rIds", r_id)


def validation_vectors(reference: ModuleType) -> Iterator[Case]:
    generated = collect(validation_inputs(reference), COUNTS["validation"], SEEDS["validation"])
    grid = list(grid_inputs(reference))
    named = [(f"validation-grid-{n:04d}", case) for n, case in enumerate(grid, 1)]
    named += [(f"validation-{n:04d}", case) for n, case in enumerate(generated, 1)]
    for name, case in named:
        container = case["container"]
        receipt = {**case["envelope"], "findings": container}
        yield {
            "name": name,
            **case,
            "reference_container_valid": answer(
                lambda c=container: reference._review_findings_container_valid(c)
            ),
            "reference_receipt_valid": answer(
                lambda r=receipt: reference.validate_review_receipt_findings(r)
            ),
        }


# --- currentness ---------------------------------------------------------------------------


class Lineage:
    """One generated lineage: a main chain plus whatever the mutations add around it."""

    def __init__(self, reference: ModuleType, rng: random.Random, prefix: str) -> None:
        self.reference = reference
        self.rng = rng
        self.prefix = prefix
        self.shapes: list[str] = []
        self.serial = 0

    def source(self) -> str:
        self.serial += 1
        return f"{self.prefix}-{self.serial}"

    def item(self, source: str, ordinal: int, first_seen: str | None = None) -> dict[str, Any]:
        first = first_seen or source
        return {
            "id": finding_id(self.reference, first, ordinal),
            "ordinal": ordinal,
            "severity": self.rng.choice(SEVERITIES),
            "confidence": self.rng.choice(CONFIDENCES),
            "classification": self.rng.choice(CLASSIFICATIONS),
            "status": self.rng.choice(STATUSES),
            "title": f"t{ordinal}",
            "body": "b",
            "rIds": [],
            "firstSeenReceiptId": first,
            "lastSeenReceiptId": source,
        }

    def root(self, items: int, head: str = HEAD, backend: str = "codex") -> dict[str, Any]:
        source = self.source()
        return {
            "schemaVersion": 1,
            "sourceReceiptId": source,
            "reviewKind": "implementation",
            "backend": backend,
            "round": 1,
            "headSha": head,
            "items": [self.item(source, n) for n in range(1, items + 1)],
        }

    def successor(self, parent: dict[str, Any], new: int, head: str = HEAD) -> dict[str, Any]:
        source = self.source()
        carried = []
        for previous in parent["items"]:
            item = copy.deepcopy(previous)
            item["lastSeenReceiptId"] = source
            item["status"] = self.rng.choice(STATUSES)
            carried.append(item)
        start = max((i["ordinal"] for i in parent["items"]), default=0) + 1
        return {
            **{k: parent[k] for k in ("schemaVersion", "reviewKind", "backend")},
            "sourceReceiptId": source,
            "round": parent["round"] + 1,
            "headSha": head,
            "supersedesReceiptId": parent["sourceReceiptId"],
            "items": carried + [self.item(source, n) for n in range(start, start + new)],
        }

    def next_ordinal(self, generation: dict[str, Any]) -> int:
        return max((i["ordinal"] for i in generation["items"]), default=0) + 1

    def new_item(self, generation: dict[str, Any], **extra: Any) -> dict[str, Any]:
        item = self.item(generation["sourceReceiptId"], self.next_ordinal(generation))
        item.update(extra)
        generation["items"].append(item)
        return item


CHAIN_MUTATIONS = (
    "prior-edge",
    "prior-edge",
    "drop",
    "drop-and-name",
    "re-add",
    "owner-twice",
    "owner-later",
    "prior-unknown",
    "prior-sibling",
    "forged-first-seen",
    "rederived",
)
SET_MUTATIONS = (
    "fork-at-head",
    "fork-elsewhere",
    "stale-tip",
    "second-root",
    "other-backend",
    "round-gap",
    "missing-parent",
    "duplicate-source",
    "invalid-candidate",
    "legacy",
)


def mutate_chain(lineage: Lineage, chain: list[dict[str, Any]], name: str, g: int) -> bool:
    """Change generation g (>= 1) and rebuild every later generation on top of it; False when
    `name` has nothing to work on there."""
    rng = lineage.rng
    generation, older = chain[g], {i["id"] for gen in chain[:g] for i in gen["items"]}
    carried = [i for i in generation["items"] if i["id"] in older]
    has_next = g + 1 < len(chain)
    if name == "prior-edge" and older:
        lineage.new_item(generation, priorFindingId=rng.choice(sorted(older)))
    elif name in ("drop", "drop-and-name") and carried:
        dropped = rng.choice(carried)
        generation["items"].remove(dropped)
        if name == "drop-and-name":
            lineage.new_item(generation, priorFindingId=dropped["id"])
    elif name == "re-add" and carried and has_next:
        dropped = rng.choice(carried)
        generation["items"].remove(dropped)
        rebuild(lineage, chain, g)
        chain[g + 1]["items"].append(
            {**dropped, "lastSeenReceiptId": chain[g + 1]["sourceReceiptId"]}
        )
        g += 1
    elif name == "owner-twice" and older:
        prior = rng.choice(sorted(older))
        lineage.new_item(generation, priorFindingId=prior)
        lineage.new_item(generation, priorFindingId=prior)
    elif name == "owner-later" and older and has_next:
        prior = rng.choice(sorted(older))
        lineage.new_item(generation, priorFindingId=prior)
        rebuild(lineage, chain, g)
        lineage.new_item(chain[g + 1], priorFindingId=prior)
        g += 1
    elif name == "prior-unknown":
        lineage.new_item(generation, priorFindingId="finding-" + "0" * 32)
    elif name == "prior-sibling":
        first = lineage.new_item(generation)
        second = lineage.new_item(generation, priorFindingId=first["id"])
        if rng.random() < 0.5:  # the reference's walk depends on item order
            items = generation["items"]
            items[items.index(first)], items[items.index(second)] = second, first
    elif name == "forged-first-seen":
        ordinal = lineage.next_ordinal(generation)
        claimed = chain[rng.randrange(0, g)]["sourceReceiptId"]
        generation["items"].append(
            lineage.item(generation["sourceReceiptId"], ordinal, first_seen=claimed)
        )
    elif name == "rederived" and carried:
        victim = rng.choice(carried)
        index = generation["items"].index(victim)
        generation["items"][index] = lineage.item(generation["sourceReceiptId"], victim["ordinal"])
    else:
        return False
    rebuild(lineage, chain, g)
    return True


def rebuild(lineage: Lineage, chain: list[dict[str, Any]], g: int) -> None:
    """Regenerate generations after g as complete snapshots of their (changed) parent."""
    for later in range(g + 1, len(chain)):
        fresh = lineage.successor(chain[later - 1], 0, head=chain[later]["headSha"])
        fresh["sourceReceiptId"] = chain[later]["sourceReceiptId"]
        for item in fresh["items"]:
            item["lastSeenReceiptId"] = fresh["sourceReceiptId"]
        chain[later] = fresh


def mutate_set(lineage: Lineage, chain: list[dict[str, Any]], extra: list[Any], name: str) -> None:
    rng = lineage.rng
    if name in ("fork-at-head", "fork-elsewhere"):
        parent = rng.choice(chain)
        head = HEAD if name == "fork-at-head" else OTHER_HEAD
        extra.append(lineage.successor(parent, rng.randint(0, 2), head=head))
    elif name == "stale-tip":
        chain[-1]["headSha"] = OTHER_HEAD
    elif name == "second-root":
        extra.append(lineage.root(rng.randint(0, 2), head=rng.choice((HEAD, OTHER_HEAD))))
    elif name == "other-backend":
        extra.append(lineage.root(1, backend="copilot"))
    elif name == "round-gap" and len(chain) > 1:
        for generation in chain[rng.randrange(1, len(chain)) :]:
            generation["round"] += 1
    elif name == "missing-parent" and len(chain) > 2:
        del chain[rng.randrange(0, len(chain) - 1)]
    elif name == "duplicate-source":
        twin = copy.deepcopy(rng.choice(chain))
        twin["headSha"] = OTHER_HEAD
        extra.append(twin)
    elif name == "invalid-candidate":
        broken = lineage.root(1, head=OTHER_HEAD, backend=rng.choice(("codex", "copilot")))
        broken["items"][0]["title"] = ""
        extra.append(broken)
    elif name == "legacy":
        extra.append(None)


@st.composite
def lineages(draw: st.DrawFn, reference: ModuleType) -> Case:
    rng = draw(st.randoms(use_true_random=False))
    lineage = Lineage(reference, rng, draw(ids))
    chain = [lineage.root(rng.randint(0, 3))]
    for _ in range(rng.randint(0, 4)):
        chain.append(lineage.successor(chain[-1], rng.randint(0, 2)))
    for _ in range(rng.randint(0, 2)):
        name = rng.choice(CHAIN_MUTATIONS)
        if len(chain) > 1 and mutate_chain(lineage, chain, name, rng.randrange(1, len(chain))):
            lineage.shapes.append(name)
    extra: list[Any] = []
    for _ in range(rng.randint(0, 2)):
        name = rng.choice(SET_MUTATIONS)
        lineage.shapes.append(name)
        mutate_set(lineage, chain, extra, name)
    candidates = chain + extra
    rng.shuffle(candidates)
    for generation in candidates:
        if generation is not None and rng.random() < 0.3:
            rng.shuffle(generation["items"])
    head = HEAD if rng.random() < 0.9 else OTHER_HEAD
    return {"shapes": lineage.shapes, "head": head, "containers": candidates}


def lineage_grid(reference: ModuleType) -> Iterator[Case]:
    """Each mutation alone, on a three-generation chain whose tip is at the head: once at
    the middle generation and once at the tip (chain mutations), or once (set mutations)."""
    for number, (name, g) in enumerate(
        [(name, g) for name in dict.fromkeys(CHAIN_MUTATIONS) for g in (1, 2)]
        + [(name, -1) for name in SET_MUTATIONS]
    ):
        rng = random.Random(number)  # noqa: S311  # reproducible shapes, not secrets
        lineage = Lineage(reference, rng, "grid-\u00e9")
        chain = [lineage.root(2)]
        chain += [lineage.successor(chain[-1], 1)]
        chain += [lineage.successor(chain[-1], 1)]
        extra: list[Any] = []
        applied = mutate_chain(lineage, chain, name, g) if g > 0 else True
        if g < 0:
            mutate_set(lineage, chain, extra, name)
        if applied:
            yield {"shapes": [name], "head": HEAD, "containers": chain + extra}


def as_receipt(container: dict[str, Any] | None) -> dict[str, Any]:
    """The receipt a container travels in (None: a legacy receipt without findings)."""
    envelope = {"type": "impl_review", "mode": "codex", "verdict": "NEEDS_WORK"}
    if container is None:
        return envelope
    return {**envelope, "mode": container["backend"], "findings": container}


def currentness_vectors(reference: ModuleType) -> Iterator[Case]:
    generated = collect(lineages(reference), COUNTS["currentness"], SEEDS["currentness"])
    named = [
        (f"currentness-grid-{n:04d}", case) for n, case in enumerate(lineage_grid(reference), 1)
    ]
    named += [(f"currentness-{n:04d}", case) for n, case in enumerate(generated, 1)]
    for name, case in named:
        receipts = [as_receipt(c) for c in case["containers"]]
        tip = answer(
            lambda r=receipts, h=case["head"]: reference.select_current_review_findings(
                r, current_head_sha=h, review_kind="implementation", backend="codex"
            )
        )
        if isinstance(tip, dict) and "sourceReceiptId" in tip:
            tip = tip["sourceReceiptId"]
        yield {"name": name, **case, "reference_tip": tip}


# --- ids -----------------------------------------------------------------------------------

id_inputs = st.fixed_dictionaries(
    {
        "firstSeenReceiptId": st.text(TEXT, min_size=1, max_size=24),
        "ordinal": st.integers(1, 10**6),
        "source": st.fixed_dictionaries(
            {
                "review_kind": st.sampled_from(KINDS),
                "review_id": st.text(TEXT, min_size=1, max_size=12),
                "backend": st.sampled_from(BACKENDS) | st.text(TEXT, min_size=1, max_size=8),
                "round_number": st.integers(1, 50),
                "head_sha": SHAS,
                "review_text": st.text(TEXT, max_size=40),
            }
        ),
    }
)


def id_vectors(reference: ModuleType) -> Iterator[Case]:
    for number, case in enumerate(collect(id_inputs, COUNTS["ids"], SEEDS["ids"]), 1):
        yield {
            "name": f"ids-{number:04d}",
            **case,
            "reference_id": finding_id(reference, case["firstSeenReceiptId"], case["ordinal"]),
            "reference_sourceReceiptId": reference._review_receipt_findings_id(**case["source"]),
        }


# --- green receipts ------------------------------------------------------------------------

AGES = st.sampled_from(
    [
        timedelta(0),
        timedelta(seconds=1),
        timedelta(hours=23, minutes=59),
        timedelta(hours=24),
        timedelta(hours=24, microseconds=1),
        timedelta(hours=25),
        timedelta(seconds=-1),
        timedelta(hours=-1),
    ]
)
ODD_TIMESTAMPS = st.sampled_from(
    [
        "2026-11-30",
        "2026-11-30T07:00:00",
        "20261130T070000Z",
        "2026-11-30T07:00:00z",
        "2026-11-30T07:00:00+0000",
        "2026-11-30 07:00:00+00:00",
        "0001-01-01T00:00:00+01:00",
        "9999-12-31T23:59:59-01:00",
        "yesterday",
        "",
        7,
        None,
    ]
)


@st.composite
def green_inputs(draw: st.DrawFn) -> Case:
    command = draw(
        st.sampled_from(["make test", "pytest -q", "make test "]) | st.text(TEXT, max_size=20)
    )
    written = GREEN_NOW - draw(AGES)
    style = draw(st.sampled_from(["Z", "+00:00", "+05:30", "-08:00"]))
    offset = {"Z": UTC, "+00:00": UTC}.get(style) or datetime.strptime(style, "%z").tzinfo
    stamp = written.astimezone(offset).isoformat()
    receipt: dict[str, Any] = {
        "schema": 1,
        "head_sha": GREEN_HEAD,
        "gate_id": GREEN_GATE,
        "command_sha256": hashlib.sha256(command.encode("utf-8")).hexdigest(),
        "timestamp": stamp.replace("+00:00", "Z") if style == "Z" else stamp,
    }
    for _ in range(draw(st.integers(0, 2))):
        key = draw(st.sampled_from(sorted(receipt)))
        match key:
            case "timestamp":
                receipt[key] = draw(ODD_TIMESTAMPS)
            case "command_sha256":
                fingerprint = hashlib.sha256(command.encode("utf-8")).hexdigest()
                receipt[key] = draw(
                    st.sampled_from([fingerprint.upper(), "0" * 64, None, fingerprint[:63]])
                )
            case "schema":
                receipt[key] = draw(st.sampled_from([True, 1.0, "1", 2, 0, None]))
            case "head_sha":
                receipt[key] = draw(st.sampled_from([GREEN_HEAD.upper(), GREEN_HEAD[:8], None]))
            case _:
                receipt[key] = draw(st.sampled_from(["smoke", "", None, GREEN_GATE.upper()]))
        if draw(st.integers(0, 4)) == 0:
            del receipt[key]
    return {"command": command, "receipt": receipt}


def green_vectors(reference: ModuleType) -> Iterator[Case]:
    for number, case in enumerate(collect(green_inputs(), COUNTS["green"], SEEDS["green"]), 1):
        decision = answer(
            lambda c=case: list(
                reference._gate_receipt_valid(c["receipt"], GREEN_HEAD, c["command"])
            )
        )
        yield {"name": f"green-{number:04d}", **case, "reference": decision}


# --- output --------------------------------------------------------------------------------


def write(path: Path, about: str, extra: dict[str, Any], cases: list[Case]) -> None:
    """One case per line: compact, and a rerun's diff shows which vectors changed."""
    header = {"_about": about, **extra}
    lines = [
        json.dumps(case, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
        for case in cases
    ]
    head = json.dumps(header, ensure_ascii=False, sort_keys=True, indent=1)[:-2]
    path.write_text(head + ',\n "cases": [\n' + ",\n".join(lines) + "\n ]\n}\n", encoding="utf-8")
    print(f"{path.relative_to(ROOT)}: {len(cases)} vectors, {path.stat().st_size} bytes")


# file -> (what the reference was asked, header fields, vectors)
OUTPUTS: dict[str, tuple[str, dict[str, Any], Callable[[ModuleType], Iterator[Case]]]] = {
    "container-validation.json": (
        "_review_findings_container_valid and validate_review_receipt_findings on a grid of "
        "single changes to one valid container, then on generated (mostly mutated) containers "
        "and envelopes. {'raised': <type>}: the reference crashed.",
        {"seed": SEEDS["validation"]},
        validation_vectors,
    ),
    "currentness.json": (
        "select_current_review_findings(review_kind='implementation', backend='codex'); each "
        "container travels in an impl_review receipt whose mode is its backend (null: a legacy "
        "receipt without findings). reference_tip null: no current tip.",
        {"seed": SEEDS["currentness"]},
        currentness_vectors,
    ),
    "finding-ids.json": (
        "_review_finding_lineage_id and _review_receipt_findings_id.",
        {"seed": SEEDS["ids"]},
        id_vectors,
    ),
    "green-receipts.json": (
        "_gate_receipt_valid(receipt, head_sha, command) with its clock frozen at `now`; the "
        "gate id is `gate_id`.",
        {
            "seed": SEEDS["green"],
            "now": GREEN_NOW.isoformat(),
            "head_sha": GREEN_HEAD,
            "gate_id": GREEN_GATE,
        },
        green_vectors,
    ),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reference", type=Path, default=DEFAULT_REFERENCE)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    reference = load_reference(args.reference)
    args.out.mkdir(parents=True, exist_ok=True)
    made_by = f"Generated by scripts/conformance/generate_flow_vectors.py from {REFERENCE}"
    for name, (asked, header, vectors) in OUTPUTS.items():
        write(args.out / name, f"{made_by}: {asked}", header, list(vectors(reference)))


if __name__ == "__main__":
    main()
