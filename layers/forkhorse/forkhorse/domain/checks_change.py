"""The protected-checks policy: how a reviewed commit's checks differ from canonical's. Pure.

The checks a receipt proves come from the reviewed commit, so a commit can replace a check
with one that always passes. With the policy on (required mode), every check canonical's
head declares that the reviewed commit removes or changes (its declaration, or its quick
module's bytes) is a `checks-changed` reason until the owner accepts exactly that change.
Added checks are shown but protect nothing. A check is identified by its name, so a
renamed check is one removed and one added.

A check also covers the paths it protects (`checks.protected_globs`, from canonical's
declaration of it): a file there that the commit adds, removes or changes (its blob or
mode) changes the check, and each such path is named in a reason. Only trees that differ
between the two commits are read, at most `PROTECTS.compared_entries` entries; past that
(or when a tree cannot be read) the paths count as changed, uncompared.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from forkhorse.domain.checks import (
    GlobSet,
    QuickCheckDef,
    in_run_order,
    protected_globs,
    quick_module_digest,
)
from forkhorse.domain.gate import Definitions, gate_reason
from forkhorse.domain.limits import PROTECTS, SNAPSHOT
from forkhorse.domain.model import CheckChange

UNREADABLE_MODULE = "unreadable"
# The key of a check's protected paths when they could not be compared (no path is "").
UNCOMPARED = ""
_DIRECTORY_MODE = 0o040000


@dataclass(frozen=True)
class DeclaredCheck:
    """One check as a commit declares it: its normalized declaration and, for a quick
    check, its module's digest (`UNREADABLE_MODULE` when the module cannot be read)."""

    definition: Mapping[str, object]
    module_digest: str | None = None
    # What the check protects (derived from `definition`, so not fingerprinted by itself).
    globs: tuple[str, ...] = field(default=(), compare=False)
    # Protected paths that differ from the other commit: each one's `<mode> <blob>` here,
    # None where absent (`UNCOMPARED`: this commit's tree, when they could not be compared).
    protected: Mapping[str, str | None] = field(default_factory=dict)

    @property
    def fingerprint(self) -> str:
        fingerprinted: dict[str, object] = {
            "definition": self.definition,
            "moduleDigest": self.module_digest,
        }
        if self.protected:  # absent otherwise: a fingerprint from before protects is unchanged
            fingerprinted["protected"] = dict(self.protected)
        canonical = json.dumps(fingerprinted, sort_keys=True, separators=(",", ":"))
        return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()

    def to_json(self) -> dict[str, Any]:
        return {"definition": dict(self.definition), "moduleDigest": self.module_digest}


def declared_checks(
    definitions: Definitions, module_sources: Mapping[str, str | None]
) -> dict[str, DeclaredCheck]:
    """A commit's checks by name, in run order; none when absent or invalid."""
    if definitions.error is not None or definitions.absent:
        return {}
    declared: dict[str, DeclaredCheck] = {}
    for check in in_run_order(definitions.checks):
        digest = None
        if isinstance(check, QuickCheckDef):
            source = module_sources.get(check.module)
            digest = UNREADABLE_MODULE if source is None else quick_module_digest(source)
        declared[check.name] = DeclaredCheck(check.definition(), digest, protected_globs(check))
    return declared


class TreeItem(Protocol):
    """One entry of a git tree, as `GitStore.read_tree` returns it."""

    @property
    def name(self) -> bytes: ...

    @property
    def mode(self) -> int: ...

    @property
    def sha(self) -> str: ...


type ReadTree = Callable[[str], Sequence[TreeItem]]
# A protected path's entry in each commit (`<mode> <blob>`), None where it is absent.
type PathChange = tuple[str | None, str | None]


class ProtectedPathsUncompared(Exception):
    """The commits' trees differ in more entries than may be read, or nest too deep."""


def changed_protected_paths(
    read_tree: ReadTree,
    base_tree: str,
    head_tree: str,
    globs: GlobSet,
    max_entries: int = PROTECTS.compared_entries,
) -> dict[str, PathChange]:
    """The non-directory paths `globs` protect whose entry differs between two trees, with
    each side's entry. Walks only subtrees that differ (by id) and could hold a protected
    path, charging every entry read; raises `ProtectedPathsUncompared` past `max_entries`
    or `SNAPSHOT.path_levels`. A `read_tree` failure propagates to the caller."""
    changed: dict[str, PathChange] = {}
    if base_tree == head_tree or not globs:
        return changed
    read = 0
    pending: list[tuple[tuple[str, ...], str | None, str | None]] = [((), base_tree, head_tree)]
    while pending:
        parts, base, head = pending.pop()
        if len(parts) >= SNAPSHOT.path_levels:
            raise ProtectedPathsUncompared()
        base_entries = _entries(read_tree, base)
        head_entries = _entries(read_tree, head)
        read += len(base_entries) + len(head_entries)
        if read > max_entries:
            raise ProtectedPathsUncompared()
        for name in sorted(base_entries.keys() | head_entries.keys()):
            before, after = base_entries.get(name), head_entries.get(name)
            if before == after:
                continue
            path = (*parts, name)
            before_dir, after_dir = _subtree(before), _subtree(after)
            if (before_dir or after_dir) and globs.may_hold(path):
                pending.append((path, before_dir, after_dir))
            before_leaf, after_leaf = _leaf(before), _leaf(after)
            if before_leaf != after_leaf and globs.matches(path):
                changed["/".join(path)] = (before_leaf, after_leaf)
    return dict(sorted(changed.items()))


def _entries(read_tree: ReadTree, tree: str | None) -> dict[str, tuple[int, str]]:
    if tree is None:
        return {}
    return {
        item.name.decode("utf-8", "surrogateescape"): (item.mode, item.sha)
        for item in read_tree(tree)
    }


def _subtree(entry: tuple[int, str] | None) -> str | None:
    return entry[1] if entry is not None and entry[0] == _DIRECTORY_MODE else None


def _leaf(entry: tuple[int, str] | None) -> str | None:
    if entry is None or entry[0] == _DIRECTORY_MODE:
        return None
    return f"{entry[0]:06o} {entry[1]}"


def with_protected_changes(
    base: Mapping[str, DeclaredCheck],
    head: Mapping[str, DeclaredCheck],
    compare: Callable[[GlobSet], dict[str, PathChange]],
    trees: tuple[str, str],
) -> tuple[dict[str, DeclaredCheck], dict[str, DeclaredCheck]]:
    """`base` and `head` with each check both declare carrying its protected paths that
    differ, each side with its own entries. The globs are canonical's (`base`): a commit
    that changes them changes the declaration already. `compare` walks the two trees
    (`trees`) once, for every check's globs together; uncompared paths name each tree."""
    base_out, head_out = dict(base), dict(head)
    kept = [name for name in base if name in head and base[name].globs]
    if not kept:
        return base_out, head_out
    try:
        changed: dict[str, PathChange] | None = compare(
            GlobSet([glob for name in kept for glob in base[name].globs])
        )
    except ProtectedPathsUncompared:
        changed = None
    for name in kept:
        if changed is None:
            mine: dict[str, PathChange] = {UNCOMPARED: trees}
        else:
            own = GlobSet(base[name].globs)
            mine = {path: sides for path, sides in changed.items() if own.matches(path.split("/"))}
        if mine:
            before = {path: sides[0] for path, sides in mine.items()}
            after = {path: sides[1] for path, sides in mine.items()}
            base_out[name] = replace(base[name], protected=before)
            head_out[name] = replace(head[name], protected=after)
    return base_out, head_out


@dataclass(frozen=True)
class ChecksDiff:
    """Canonical head's checks (`base`) against the reviewed commit's (`head`)."""

    base: Mapping[str, DeclaredCheck]
    head: Mapping[str, DeclaredCheck]
    changes: tuple[CheckChange, ...]

    @property
    def protected(self) -> tuple[CheckChange, ...]:
        """The removed and changed checks: what the policy asks the owner to accept."""
        return tuple(change for change in self.changes if change.change != "added")

    def reasons(self) -> list[str]:
        """`checks-changed` reasons: one per removed check, one per changed check whose
        declaration or module changed, and one per protected path that changed (at most
        `PROTECTS.reasons_per_check` a check, then one counting the rest)."""
        return [
            gate_reason("checks-changed", sentence)
            for change in self.protected
            for sentence in self._sentences(change)
        ]

    def _sentences(self, change: CheckChange) -> list[str]:
        if change.change == "removed":
            return [f"Check {change.check} was removed."]
        before, after = self.base[change.check], self.head[change.check]
        parts = []
        if before.definition != after.definition:
            parts.append("declaration")
        if before.module_digest != after.module_digest:
            parts.append("module")
        sentences = [f"Check {change.check}'s {' and '.join(parts)} changed."] if parts else []
        return sentences + _path_sentences(change.check, before.protected, after.protected)

    def to_json(self) -> list[dict[str, Any]]:
        """The diff as the console shows it: each differing check, before and after."""
        shown = []
        for change in self.changes:
            before, after = self.base.get(change.check), self.head.get(change.check)
            shown.append(
                {
                    "check": change.check,
                    "change": change.change,
                    "protected": change.change != "added",
                    "before": None if before is None else before.to_json(),
                    "after": None if after is None else after.to_json(),
                }
            )
        return shown


def _path_sentences(
    check: str, before: Mapping[str, str | None], after: Mapping[str, str | None]
) -> list[str]:
    by = f"protected by check '{check}'"
    if UNCOMPARED in after:
        return [
            f"The paths {by} could not be compared with canonical's (the trees differ in "
            f"more than {PROTECTS.compared_entries:,} entries, or could not be read); "
            "read the whole diff before accepting."
        ]
    sentences = []
    paths = sorted(after)
    for path in paths[: PROTECTS.reasons_per_check]:
        if before.get(path) is None:
            done = "was added"
        elif after[path] is None:
            done = "was removed"
        else:
            done = "changed"
        sentences.append(f"{_shown_path(path)} ({by}) {done}.")
    rest = len(paths) - PROTECTS.reasons_per_check
    if rest > 0:
        sentences.append(f"{rest} more paths {by} changed.")
    return sentences


def _shown_path(path: str) -> str:
    """A path as a reason names it: as is when plain, else as an escaped JSON string."""
    if path.isascii() and path.isprintable() and " " not in path and '"' not in path:
        return path
    return json.dumps(path, ensure_ascii=True)


def diff_checks(base: Mapping[str, DeclaredCheck], head: Mapping[str, DeclaredCheck]) -> ChecksDiff:
    """Removed and changed checks in canonical's run order, then added ones in the commit's."""
    changes: list[CheckChange] = []
    for name, before in base.items():
        after = head.get(name)
        if after is None:
            changes.append(
                CheckChange(check=name, change="removed", before=before.fingerprint, after=None)
            )
        elif after.fingerprint != before.fingerprint:
            changes.append(
                CheckChange(
                    check=name, change="changed", before=before.fingerprint, after=after.fingerprint
                )
            )
    for name, after in head.items():
        if name not in base:
            changes.append(
                CheckChange(check=name, change="added", before=None, after=after.fingerprint)
            )
    return ChecksDiff(base, head, tuple(changes))


def unaccepted_reasons(diff: ChecksDiff, accepted: Sequence[CheckChange]) -> list[str]:
    """Why `accepted` does not cover the diff: nothing when nothing is protected; otherwise
    the owner's acceptance must be of exactly this change (canonical's checks may have
    moved since, and a consent never silently covers a different diff)."""
    protected = diff.protected
    if not protected or tuple(accepted) == protected:
        return []
    if accepted:
        stale = gate_reason(
            "checks-changed",
            "The accepted checks change differs from the change against canonical's "
            "current head; approve again to accept it.",
        )
        return [stale, *diff.reasons()]
    return diff.reasons()
