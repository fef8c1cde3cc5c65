"""What one fork may keep stored: its refs, and the bytes its pushes leave on disk (issue 28).

Every push is bounded (`ingest/`), but nothing else bounds what an agent accumulates:
force-pushed-away data stays until the collector's grace period has passed, and what the
fork's refs reach never goes. So each push to a fork is checked against the fork's quota
(`ForkStorageLimits`) and refused whole, before its pack is stored, when it would pass it:

- **Refs.** The fork's branches and tags after the push: its refs now, plus the refs the
  push creates, minus those it deletes. Checked with the commands, before the pack is read
  (dulwich's pre-receive), on disk and on S3/DynamoDB. Pushes racing each other to one fork
  may pass it together by at most their own ref updates (100 each).
- **Bytes** (disk store). A ledger per fork (`forkhorse-storage.json` in the fork's bare
  repository) holds `settled`, what the last collection measured, and one entry per push
  since: its time, the bytes of its pack as stored (a thin pack completed with its bases)
  and the pack's name. A push is charged before its pack is moved in, under the ledger's
  lock, so concurrent pushes to one fork cannot pass the quota together.
  A collection that removed every unreachable pack older than its cutoff settles the
  ledger. `settled` becomes what the fork's refs keep: the packed bytes of the objects
  reachable from the fork's refs and not from canonical's (measured from the pack indexes'
  offsets, never read). Entries older than the cutoff go (what they brought is either
  kept, and in `settled`, or was removed). A younger entry stays, charged the packed bytes
  of its pack's objects that nothing reaches (they are on disk until the grace period has
  passed, whatever the refs do meanwhile); its whole bytes if its pack was merged away by
  a consolidation meanwhile (the charge then errs high, never low, until it ages).

Computation: the ref check lists the fork's refs once per push (at most the quota); the
charge reads and rewrites a ledger of at most `ledger_entries` entries; the settlement is
part of the collector's reachability walk (fork by fork, stopping at canonical's objects).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from forkhorse.domain.limits import FORK_STORAGE, ForkStorageLimits, format_bytes

LEDGER_NAME = "forkhorse-storage.json"
_LEDGER_LOCK = "forkhorse-storage.lock"
ZERO = b"0" * 40
BYTES_VARIABLE = "FORKHORSE_FORK_QUOTA_BYTES"
REFS_VARIABLE = "FORKHORSE_FORK_QUOTA_REFS"

Command = tuple[bytes, bytes, bytes]  # (old, new, ref), as `refnames.check_commands` reads them


class QuotaExceeded(Exception):
    """A push past its fork's quota; the message is what the git client prints."""


def fork_storage_limits(environ: Mapping[str, str] | None = None) -> ForkStorageLimits:
    """The quota, with the environment's overrides (positive integers; others are ignored)."""
    values = os.environ if environ is None else environ
    limits = FORK_STORAGE
    overrides: dict[str, int] = {}
    for variable, name in ((BYTES_VARIABLE, "bytes"), (REFS_VARIABLE, "refs")):
        raw = values.get(variable, "").strip()
        if raw.isdigit() and int(raw) > 0:
            overrides[name] = int(raw)
    if not overrides:
        return limits
    return ForkStorageLimits(
        bytes=overrides.get("bytes", limits.bytes),
        refs=overrides.get("refs", limits.refs),
        ledger_entries=limits.ledger_entries,
        collect_every_seconds=limits.collect_every_seconds,
    )


@dataclass
class ForkQuota:
    """One push's view of its fork's quota: `check_refs` with the commands, `charge` with
    the pack (None: this store keeps no byte ledger, as on S3)."""

    ref_count: Callable[[], int]
    ledger: StorageLedger | None = None
    limits: ForkStorageLimits = FORK_STORAGE

    def check_commands(self, commands: Sequence[Command]) -> None:
        """Before the pack is read: the refs after the push, and a fork already at its byte
        quota (refused here without reading the pack; one that a pack would take past it is
        refused once the pack is complete)."""
        self._check_refs(commands)
        if self.ledger is not None and any(new != ZERO for _, new, _ in commands):
            used = self.ledger.usage()
            if used >= self.limits.bytes:
                raise QuotaExceeded(_over_bytes(used, None, self.limits))

    def _check_refs(self, commands: Sequence[Command]) -> None:
        created = sum(1 for old, new, _ in commands if old == ZERO and new != ZERO)
        if not created:
            return  # a push that creates no ref never passes the ref quota
        deleted = sum(1 for old, new, _ in commands if new == ZERO and old != ZERO)
        now = self.ref_count()
        after = now + created - deleted
        if after > self.limits.refs:
            raise QuotaExceeded(
                f"this fork has {now} refs and this push would leave {after}; the limit is "
                f"{self.limits.refs} refs per fork (branches and tags). Delete refs you no "
                "longer need (git push --delete) and push again"
            )

    def charge(self, size: int) -> str | None:
        """Charge a pack of `size` bytes (QuotaExceeded past the quota); a token for
        `stored`, or None when no ledger is kept."""
        return None if self.ledger is None else self.ledger.charge(size, self.limits)

    def stored(self, token: str, pack: str) -> None:
        """The charged pack is stored under this name."""
        if self.ledger is not None:
            self.ledger.name(token, pack)


@dataclass(frozen=True)
class _Push:
    when: float  # time.time() of the charge
    size: int  # the bytes charged
    token: str  # names the entry until its pack is known
    pack: str = ""  # the stored pack's name ("" until stored, or after a merge of entries)


@dataclass(frozen=True)
class _Entries:
    settled: int
    pushes: list[_Push]  # oldest first

    @property
    def total(self) -> int:
        return self.settled + sum(push.size for push in self.pushes)


class StorageLedger:
    """One fork's charged bytes (see the module): a small JSON file beside its refs,
    changed under an flock and replaced atomically."""

    def __init__(self, repo_dir: Path) -> None:
        self._path = repo_dir / LEDGER_NAME
        self._lock_path = repo_dir / _LEDGER_LOCK

    def usage(self) -> int:
        with self._locked():
            return self._read().total

    def charge(self, size: int, limits: ForkStorageLimits, now: float | None = None) -> str:
        """Add one push's bytes, or refuse the push (QuotaExceeded) leaving the ledger as it
        was. Returns the entry's token (`name`)."""
        with self._locked():
            entries = self._read()
            if entries.total + size > limits.bytes:
                raise QuotaExceeded(_over_bytes(entries.total, size, limits))
            token = secrets.token_hex(8)
            pushes = [*entries.pushes, _Push(time.time() if now is None else now, size, token)]
            while len(pushes) > limits.ledger_entries:  # merge the two oldest: the later
                first, second = pushes[0], pushes[1]  # time, so never charged less
                pushes[:2] = [_Push(second.when, first.size + second.size, second.token)]
            self._write(_Entries(entries.settled, pushes))
            return token

    def name(self, token: str, pack: str) -> None:
        with self._locked():
            entries = self._read()
            pushes = [
                _Push(push.when, push.size, push.token, pack) if push.token == token else push
                for push in entries.pushes
            ]
            self._write(_Entries(entries.settled, pushes))

    def settle(self, kept: int, cutoff: float, unreached: Mapping[str, int]) -> None:
        """After a collection that removed every unreachable pack written before `cutoff`:
        the fork is charged `kept` (what its refs reach beyond canonical) plus, for each
        push since the cutoff, its pack's bytes that nothing reaches (`unreached`, by pack
        name; the push's whole bytes when its pack is not listed)."""
        with self._locked():
            entries = self._read()
            young = [
                _Push(push.when, unreached.get(push.pack, push.size), push.token, push.pack)
                for push in entries.pushes
                if push.when >= cutoff
            ]
            self._write(_Entries(kept, young))

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        descriptor = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX)
            yield
        finally:
            os.close(descriptor)

    def _read(self) -> _Entries:
        try:
            data = json.loads(self._path.read_text())
            pushes = [
                _Push(float(when), int(size), str(token), str(pack))
                for when, size, token, pack in data["pushes"]
            ]
            return _Entries(int(data["settled"]), pushes)
        except FileNotFoundError:
            return _Entries(0, [])
        except (ValueError, KeyError, TypeError):
            return _Entries(0, [])  # unreadable: the next collection measures it again

    def _write(self, entries: _Entries) -> None:
        pushes = [[push.when, push.size, push.token, push.pack] for push in entries.pushes]
        text = json.dumps({"settled": entries.settled, "pushes": pushes})
        with tempfile.NamedTemporaryFile(
            "w", dir=self._path.parent, prefix=".storage-", delete=False
        ) as partial:
            partial.write(text)
        os.replace(partial.name, self._path)


def _over_bytes(used: int, size: int | None, limits: ForkStorageLimits) -> str:
    adds = "" if size is None else f" and this push adds {_shown(size)}"
    return (
        f"this fork already stores {_shown(used)}{adds}; the limit is "
        f"{format_bytes(limits.bytes)} per fork. Data force-pushed away counts until the "
        "server's periodic garbage collection frees it (data older than its grace period); "
        "delete refs you no longer need, or push again later"
    )


def _shown(size: int) -> str:
    return f"{size} bytes ({size / (1024 * 1024):.1f} MiB)"
