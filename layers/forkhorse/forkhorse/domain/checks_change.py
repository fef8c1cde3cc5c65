"""The protected-checks policy: how a reviewed commit's checks differ from canonical's. Pure.

The checks a receipt proves come from the reviewed commit, so a commit can replace a check
with one that always passes. With the policy on (required mode), every check canonical's
head declares that the reviewed commit removes or changes (its declaration, or its quick
module's bytes) is a `checks-changed` reason until the owner accepts exactly that change.
Added checks are shown but protect nothing. A check is identified by its name, so a
renamed check is one removed and one added.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from forkhorse.domain.checks import QuickCheckDef, in_run_order, quick_module_digest
from forkhorse.domain.gate import Definitions, gate_reason
from forkhorse.domain.model import CheckChange

UNREADABLE_MODULE = "unreadable"


@dataclass(frozen=True)
class DeclaredCheck:
    """One check as a commit declares it: its normalized declaration and, for a quick
    check, its module's digest (`UNREADABLE_MODULE` when the module cannot be read)."""

    definition: Mapping[str, object]
    module_digest: str | None = None

    @property
    def fingerprint(self) -> str:
        canonical = json.dumps(
            {"definition": self.definition, "moduleDigest": self.module_digest},
            sort_keys=True,
            separators=(",", ":"),
        )
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
        declared[check.name] = DeclaredCheck(check.definition(), digest)
    return declared


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
        """One `checks-changed` reason per removed or changed check."""
        return [gate_reason("checks-changed", self._sentence(c)) for c in self.protected]

    def _sentence(self, change: CheckChange) -> str:
        if change.change == "removed":
            return f"Check {change.check} was removed."
        before, after = self.base[change.check], self.head[change.check]
        parts = []
        if before.definition != after.definition:
            parts.append("declaration")
        if before.module_digest != after.module_digest:
            parts.append("module")
        return f"Check {change.check}'s {' and '.join(parts)} changed."

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
