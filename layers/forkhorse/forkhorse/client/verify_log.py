"""`forkhorse verify-log`: a project checked end to end from the log's static files and its
public key alone, with no help from the server's arithmetic.

In order: (1) the checkpoint's signature; (2) that its tree appends to the last checkpoint
this verifier saw (remembered after success), and that the tiles and every entry hash to
the signed root; (3) the inclusion of the entries asked for, each proved from tiles; (4) for
a project and a clone of canonical, `domain.log_audit.audit_project`: canonical's
first-parent history since its import is exactly the log's promotions, each after its
approval and, when receipts were required, a passing real receipt. A log that fails (1) to
(3) is refused; an entry asked for that is not there, and whatever (4) finds unexplained,
are findings, each naming its entry and commits.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from forkhorse.client.errors import UsageError
from forkhorse.client.git_history import GitHistory
from forkhorse.client.log_source import key_hex, parse_key_body, read_at_most
from forkhorse.client.witness import describe, write_private_json
from forkhorse.domain.checkpoint import Checkpoint, CheckpointRefused, stated_checkpoint
from forkhorse.domain.log_audit import Finding, ProjectAudit, audit_project
from forkhorse.domain.log_entries import EntryRefused, LogEntry, parse_entry
from forkhorse.tlog.note import NoteRefused
from forkhorse.tlog.verify import (
    LogKey,
    LogRefused,
    LogSource,
    TileFetcher,
    all_entries,
    check_append_only,
    check_inclusion,
    check_tiles,
    fetch_checkpoint,
)

STATE_VERSION = 1
MAX_KEY_FILE_BYTES = 16 * 1024
MAX_STATE_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class Selection:
    """Entries whose inclusion is asked for: by index, or by what their subject names."""

    indexes: tuple[int, ...] = ()
    subjects: tuple[str, ...] = ()
    commits: tuple[str, ...] = ()
    promotions: tuple[str, ...] = ()

    def wanted(self) -> list[tuple[str, str]]:
        return [
            *(("subject", s) for s in self.subjects),
            *(("commit", c) for c in self.commits),
            *(("promotion", p) for p in self.promotions),
        ]


def _matches(entry: LogEntry, field_name: str, value: str) -> bool:
    if field_name == "subject":
        return value in {str(v) for v in entry.subject.values()}
    return entry.subject.get(field_name) == value


@dataclass(frozen=True)
class ProjectCheck:
    """Canonical's history to audit for `project`, and where it came from."""

    project: str
    history: GitHistory
    where: str


@dataclass
class ProjectOutcome:
    audit: ProjectAudit
    where: str
    ref: str
    tip: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "project": self.audit.project,
            "canonical": self.where,
            "ref": self.ref,
            "tip": self.tip,
            "imported": self.audit.imported,
            "entries": self.audit.entries,
            "promotions": self.audit.promotions,
            "findings": [_finding_json(f) for f in self.audit.findings],
        }


def _finding_json(finding: Finding) -> dict[str, Any]:
    return {"message": finding.message, "entry": finding.index, "commits": list(finding.commits)}


@dataclass
class LogReport:
    where: str
    key: LogKey
    checkpoint: Checkpoint | None = None
    previous: Checkpoint | None = None
    previous_from: str | None = None
    entries: int | None = None
    included: list[tuple[int, LogEntry]] = field(default_factory=list)
    projects: list[ProjectOutcome] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    refused: str | None = None

    @property
    def every_finding(self) -> list[Finding]:
        return [*self.findings, *(f for p in self.projects for f in p.audit.findings)]

    def to_json(self) -> dict[str, Any]:
        tree = self.checkpoint
        return {
            "ok": self.refused is None and not self.every_finding,
            "log": {
                "source": self.where,
                "origin": self.key.origin,
                "keyId": key_hex(self.key),
                "size": None if tree is None else tree.size,
                "root": None if tree is None else tree.root.hex(),
            },
            "previous": None
            if self.previous is None
            else {
                "size": self.previous.size,
                "root": self.previous.root.hex(),
                "from": self.previous_from,
            },
            "refused": self.refused,
            "entries": self.entries,
            "included": [
                {"index": i, "project": e.project, "kind": e.kind, "subject": e.subject}
                for i, e in self.included
            ],
            "projects": [p.to_json() for p in self.projects],
            "findings": [_finding_json(f) for f in self.findings],
        }


@dataclass
class Verification:
    """One run of verify-log over `source` with `key`."""

    source: LogSource
    where: str
    key: LogKey
    previous: Checkpoint | None = None
    previous_from: str | None = None

    def run(self, selection: Selection, projects: Iterable[ProjectCheck]) -> tuple[LogReport, str]:
        """The report, and the checkpoint's note (to remember when the log held)."""
        report = LogReport(self.where, self.key, previous_from=self.previous_from)
        note = ""
        try:
            report.checkpoint, note = fetch_checkpoint(self.source, self.key)
            if self.previous is not None:  # a rollback or split view needs no tile to show
                report.previous = self.previous
                check_append_only(self.source, self.previous, report.checkpoint)
            check_tiles(TileFetcher(self.source, report.checkpoint.size), report.checkpoint)
            raw = all_entries(self.source, report.checkpoint)
            entries = _parse(report, raw)
            self._include(report, report.checkpoint, raw, entries, selection)
        except LogRefused as refused:
            report.refused = str(refused)
            return report, note
        for check in projects:
            report.projects.append(_audit(check, entries))
        return report, note

    def _include(
        self,
        report: LogReport,
        checkpoint: Checkpoint,
        raw: list[bytes],
        entries: list[tuple[int, LogEntry]],
        selection: Selection,
    ) -> None:
        chosen = _chosen(report, checkpoint, entries, selection)
        for index in sorted(chosen):
            check_inclusion(self.source, checkpoint, index, raw[index])
            report.included.append((index, chosen[index]))


def _parse(report: LogReport, raw: list[bytes]) -> list[tuple[int, LogEntry]]:
    report.entries = len(raw)
    parsed: list[tuple[int, LogEntry]] = []
    for index, data in enumerate(raw):
        try:
            parsed.append((index, parse_entry(data)))
        except EntryRefused as refused:
            report.findings.append(Finding(f"entry {index}: {refused}", index))
    return parsed


def _chosen(
    report: LogReport,
    checkpoint: Checkpoint,
    entries: list[tuple[int, LogEntry]],
    selection: Selection,
) -> dict[int, LogEntry]:
    """The entries the selection names; a finding for each selector that names none."""
    by_index = dict(entries)
    chosen: dict[int, LogEntry] = {}
    for index in selection.indexes:
        if index in by_index:
            chosen[index] = by_index[index]
        else:
            message = f"entry {index} is not a log entry of the tree of size {checkpoint.size}"
            report.findings.append(Finding(message, index))
    for field_name, value in selection.wanted():
        found = {i: e for i, e in entries if _matches(e, field_name, value)}
        if not found:
            report.findings.append(Finding(f"no entry of the log names {field_name} {value}"))
        chosen |= found
    return chosen


def _audit(check: ProjectCheck, entries: list[tuple[int, LogEntry]]) -> ProjectOutcome:
    audit = audit_project(check.project, entries, check.history)
    history = check.history
    if audit.entries == 0:
        audit.findings.append(Finding(f"the log has no entry of project {check.project}"))
    for commit in sorted(history.missing):
        lacking = f"the clone of canonical lacks commit {commit}, which the log names: fetch it"
        audit.findings.append(Finding(lacking, commits=(commit,)))
    if history.truncated:
        audit.findings.append(
            Finding(f"the walk of canonical's history stopped after {history.limit} commits")
        )
    return ProjectOutcome(audit, check.where, history.ref, history.tip())


# --- the key and the verifier's memory --------------------------------------------------------
def read_key(path: Path, origin: str | None) -> LogKey:
    """The key in `path`: the `/log/key` JSON, or a PEM (then `origin` names the log)."""
    data = read_at_most(path, MAX_KEY_FILE_BYTES, "the key")
    if data is None:
        raise UsageError(f"Cannot read the key {path}: no such file.")
    if len(data) > MAX_KEY_FILE_BYTES:
        raise UsageError(f"{path} is not a log key (over {MAX_KEY_FILE_BYTES} bytes).")
    try:
        if data.lstrip().startswith(b"{"):
            key = parse_key_body(data, str(path))
            if key is None:
                raise UsageError(f"{path} names no key: that deployment keeps no log.")
            if origin is not None and origin != key.origin:
                raise UsageError(f"{path} is the key of {key.origin!r}, not {origin!r}.")
        else:
            if origin is None:
                raise UsageError(f"{path} is a PEM: pass --origin, the log's name.")
            key = LogKey(origin, data.decode("utf-8", errors="replace"))
        key_hex(key)
    except (LogRefused, NoteRefused) as refused:
        raise UsageError(f"{path} is not a log key: {refused}") from None
    return key


def read_state(path: Path, origin: str) -> Checkpoint | None:
    """The checkpoint of `origin` this verifier saw last (verified then), if any."""
    notes = _state_notes(path)
    note = notes.get(origin)
    if note is None:
        return None
    try:
        return stated_checkpoint(note)
    except CheckpointRefused as broken:
        raise UsageError(f"{path} holds a broken checkpoint for {origin}: {broken}") from None


def remember(path: Path, origin: str, note: str) -> None:
    notes = _state_notes(path)
    notes[origin] = note
    write_private_json(path, {"version": STATE_VERSION, "checkpoints": notes})


def _state_notes(path: Path) -> dict[str, str]:
    raw = read_at_most(path, MAX_STATE_BYTES, "the state")
    if raw is None:
        return {}
    try:
        body = json.loads(raw)
        notes = body["checkpoints"]
        if len(raw) > MAX_STATE_BYTES or body.get("version") != STATE_VERSION:
            raise ValueError("not a verify-log state of this version")
        return {str(origin): str(note) for origin, note in notes.items()}
    except (ValueError, KeyError, TypeError, AttributeError) as broken:
        raise UsageError(f"{path} is not a verify-log state ({broken}).") from None


def summary(report: LogReport) -> list[str]:
    """The human summary: what was checked, then every finding."""
    lines = [f"log {report.key.origin} (key ID {key_hex(report.key)}) at {report.where}"]
    if report.checkpoint is not None:
        lines.append(f"checkpoint: {describe(report.checkpoint)}, signature verified")
    if report.previous is not None and report.refused is None:
        lines.append(
            f"append-only: consistent with {describe(report.previous)} seen before "
            f"({report.previous_from})"
        )
    if report.refused is not None:
        return [*lines, f"REFUSED: {report.refused}"]
    lines.append(f"tiles and entries: {report.entries} entries, hashing to the signed root")
    lines += [
        f"included: entry {i} ({e.kind} of project {e.project}, {_named(e)})"
        for i, e in report.included
    ]
    lines += [_project_line(p) for p in report.projects]
    for finding in report.every_finding:
        lines.append(f"FINDING: {finding.message}")
        lines += [f"  unexplained commit {commit}" for commit in finding.commits]
    found = len(report.every_finding)
    lines.append("all holds" if not found else f"{found} finding(s)")
    return lines


def _named(entry: LogEntry) -> str:
    shown = [f"{k} {v}" for k, v in entry.subject.items() if k in ("commit", "promotion")]
    return ", ".join(shown) or entry.key


def _project_line(outcome: ProjectOutcome) -> str:
    audit = outcome.audit
    return (
        f"project {audit.project}: canonical {outcome.ref} at {outcome.tip} ({outcome.where}), "
        f"imported at {audit.imported}: {audit.promotions} promotion(s) and {audit.entries} "
        "entries checked"
    )
