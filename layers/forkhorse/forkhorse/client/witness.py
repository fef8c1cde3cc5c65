"""Every client is a witness of the server's transparency log.

Per server URL the witness remembers the log's key (its origin and public PEM, trusted on
first use from `GET /log/key`, or pinned explicitly) and the newest checkpoint it verified,
in a small JSON file beside the client's profiles (`config.witness_path`, mode 0600, written
atomically under a lock). Each later look fetches `/log/checkpoint`, verifies its signature
with the pinned key, and checks that its tree appends to the remembered one, with the proof
computed from tiles (`tlog.verify.check_append_only`); then it remembers the newer one.
When nothing changed that is one small GET and one signature check.

It refuses (`WitnessRefused`, naming what changed) a different key or origin, a rollback,
a split view (two roots for one size), rewritten history, tiles that do not match the
signed root, and a log that is gone once pinned. A server that never had a log (404, or
any answer that names no key, on `/log/key` before anything was pinned) is tolerated, with
nothing to witness. A deliberate
key rotation is accepted only by forgetting the pin (`forkhorse witness forget`).
"""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, Protocol

from forkhorse.client.errors import ClientError, UsageError, WitnessRefused
from forkhorse.client.log_source import key_hex, read_at_most
from forkhorse.domain.checkpoint import Checkpoint, CheckpointRefused, stated_checkpoint
from forkhorse.tlog.verify import (
    CHECKPOINT_PATH,
    LogKey,
    LogRefused,
    LogSource,
    TileFetcher,
    check_append_only,
    check_tiles,
    open_checkpoint,
    short_digest,
)

STATE_VERSION = 1
MAX_STATE_BYTES = 4 * 1024 * 1024
FORGET = "forkhorse witness forget --server"

type Seen = Literal["no-log", "no-checkpoint", "first", "unchanged", "advanced"]


class KeyedLogSource(LogSource, Protocol):
    def key(self) -> LogKey | None:
        """The origin and key the server names now; None when it keeps no log."""
        ...


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def describe(checkpoint: Checkpoint) -> str:
    return f"size {checkpoint.size}, root {short_digest(checkpoint.root)}"


@dataclass(frozen=True)
class Pin:
    """What the witness holds for one server."""

    key: LogKey
    pinned_at: str
    how: Literal["first use", "given"]
    checkpoint: str | None = None  # the newest signed note verified
    verified_at: str | None = None

    def tree(self) -> Checkpoint | None:
        """The remembered checkpoint (verified when it was remembered)."""
        if self.checkpoint is None:
            return None
        try:
            return stated_checkpoint(self.checkpoint)
        except CheckpointRefused as broken:
            raise UsageError(f"The witness's remembered checkpoint is broken: {broken}") from None

    def to_json(self) -> dict[str, Any]:
        return {
            "origin": self.key.origin,
            "publicKey": self.key.public_pem,
            "keyId": key_hex(self.key),
            "pinnedAt": self.pinned_at,
            "how": self.how,
            "checkpoint": self.checkpoint,
            "verifiedAt": self.verified_at,
        }

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> Pin:
        how: Literal["first use", "given"] = "given" if body.get("how") == "given" else "first use"
        return cls(
            LogKey(str(body["origin"]), str(body["publicKey"])),
            str(body["pinnedAt"]),
            how,
            body.get("checkpoint"),
            body.get("verifiedAt"),
        )


@dataclass(frozen=True)
class Witnessed:
    """One look at a server's log: what was seen, and the checkpoint remembered before."""

    server: str
    seen: Seen
    checkpoint: Checkpoint | None = None
    previous: Checkpoint | None = None


class WitnessState:
    """The JSON file of pins, read and replaced whole under an exclusive lock."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @contextmanager
    def locked(self) -> Iterator[dict[str, Pin]]:
        """The pins, for reading and changing; written back when the block ends cleanly."""
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        lock_path = self.path.with_name(self.path.name + ".lock")
        descriptor = os.open(lock_path, os.O_WRONLY | os.O_CREAT, 0o600)
        with os.fdopen(descriptor, "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            pins = self.read()
            before = dict(pins)
            yield pins
            if pins != before:
                self._write(pins)

    def read(self) -> dict[str, Pin]:
        raw = read_at_most(self.path, MAX_STATE_BYTES, "the witness state")
        if raw is None:
            return {}
        try:
            body = json.loads(raw)
            if len(raw) > MAX_STATE_BYTES or body.get("version") != STATE_VERSION:
                raise ValueError("not a witness state of this version")
            return {url: Pin.from_json(pin) for url, pin in body["servers"].items()}
        except (ValueError, KeyError, TypeError, AttributeError) as broken:
            raise UsageError(
                f"The witness state {self.path} is unreadable ({broken}); move it away to "
                "start over (every server is then trusted again on first use)."
            ) from None

    def _write(self, pins: dict[str, Pin]) -> None:
        body = {
            "version": STATE_VERSION,
            "servers": {url: pin.to_json() for url, pin in sorted(pins.items())},
        }
        write_private_json(self.path, body)


def write_private_json(path: Path, body: dict[str, Any]) -> None:
    """Replace `path` with `body`, whole or not at all, readable by its owner alone."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-")
    try:
        os.fchmod(descriptor, 0o600)
        with os.fdopen(descriptor, "w") as out:
            json.dump(body, out, indent=2, sort_keys=True)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def server_key(url: str) -> str:
    """How the state names a server: its URL without a trailing slash."""
    return url.rstrip("/")


class LogWitness:
    def __init__(self, state: WitnessState) -> None:
        self.state = state

    def pins(self) -> dict[str, Pin]:
        return self.state.read()

    def pin(self, server: str, key: LogKey) -> Pin:
        """Pin `key` for `server` explicitly, replacing any pin (and its checkpoint)."""
        key_hex(key)  # a key that cannot verify a note is not pinned
        pin = Pin(key, _now(), "given")
        with self.state.locked() as pins:
            pins[server_key(server)] = pin
        return pin

    def forget(self, server: str) -> Pin | None:
        with self.state.locked() as pins:
            return pins.pop(server_key(server), None)

    def observe(self, server: str, source: KeyedLogSource) -> Witnessed:
        """Look at the server's log now; WitnessRefused if it is not the one seen before."""
        name = server_key(server)
        with self.state.locked() as pins:
            pin = pins.get(name)
            if pin is None:
                key = _named_key(source)
                if key is None:
                    return Witnessed(name, "no-log")  # nothing pinned, nothing to witness
                pin = Pin(key, _now(), "first use")
                pins[name] = pin
            try:
                seen = _Look(name, pin, source).run()
            except LogRefused as refused:  # a file no log can serve (too large, garbled)
                message = f"The transparency log of {name} is refused: {refused}."
                raise WitnessRefused(message) from None
            if seen.checkpoint_note is not None:
                pins[name] = replace(pin, checkpoint=seen.checkpoint_note, verified_at=_now())
            return seen.witnessed


def _named_key(source: KeyedLogSource) -> LogKey | None:
    """The key the server names now; None when it names none, or none that can be read
    (before a pin that is a server without a log: trusting nothing yet, nothing is lost)."""
    try:
        return source.key()
    except (ClientError, LogRefused):
        return None


@dataclass(frozen=True)
class _Outcome:
    witnessed: Witnessed
    checkpoint_note: str | None = None  # to remember, when it is newer


@dataclass(frozen=True)
class _Look:
    server: str
    pin: Pin
    source: KeyedLogSource

    def run(self) -> _Outcome:
        previous = self.pin.tree()
        data = self.source.read(CHECKPOINT_PATH)
        if data is None:
            return _Outcome(Witnessed(self.server, self._no_checkpoint(previous)))
        note = data.decode("utf-8", errors="replace")
        try:
            checkpoint = open_checkpoint(note, self.pin.key)
        except LogRefused as refused:
            raise self._key_problem(refused) from None
        if previous is None:
            self._refuse_unless(lambda: self._tiles_match(checkpoint), None, checkpoint)
            return _Outcome(Witnessed(self.server, "first", checkpoint), note)
        if (checkpoint.size, checkpoint.root) == (previous.size, previous.root):
            return _Outcome(Witnessed(self.server, "unchanged", checkpoint, previous))
        self._refuse_unless(
            lambda: check_append_only(self.source, previous, checkpoint), previous, checkpoint
        )
        return _Outcome(Witnessed(self.server, "advanced", checkpoint, previous), note)

    def _tiles_match(self, checkpoint: Checkpoint) -> None:
        check_tiles(TileFetcher(self.source, checkpoint.size), checkpoint)

    def _no_checkpoint(self, previous: Checkpoint | None) -> Seen:
        if previous is not None:
            raise WitnessRefused(
                f"The transparency log of {self.server} is refused: it serves no checkpoint, "
                f"but this client verified {describe(previous)} there "
                f"({self.pin.verified_at}). The server lost or hid its log."
            )
        if _named_key(self.source) != self.pin.key:
            raise self._key_problem(LogRefused("it serves no checkpoint"))
        return "no-checkpoint"

    def _refuse_unless(
        self, check: Callable[[], None], previous: Checkpoint | None, checkpoint: Checkpoint
    ) -> None:
        try:
            check()
        except LogRefused as refused:
            before = (
                f"verified before: {describe(previous)} ({self.pin.verified_at})"
                if previous is not None
                else "nothing verified before"
            )
            raise WitnessRefused(
                f"The transparency log of {self.server} is refused: {refused}. This client "
                f"{before}; the server now serves {describe(checkpoint)}. Do not trust what "
                "it shows; tell its operator."
            ) from None

    def _key_problem(self, refused: LogRefused) -> WitnessRefused:
        pinned = self.pin.key
        named = _named_key(self.source)
        was = f"origin {pinned.origin!r}, key ID {key_hex(pinned)} (pinned {self.pin.pinned_at})"
        if named is None:
            now = "names no readable log key"
        elif named != pinned:
            now = f"now names origin {named.origin!r}, key ID {key_hex(named)}"
        else:
            return WitnessRefused(
                f"The transparency log of {self.server} is refused: {refused} (with the "
                f"pinned key: {was})."
            )
        return WitnessRefused(
            f"The transparency log of {self.server} is refused: its key changed. Pinned: "
            f"{was}; the server {now} ({refused}). If its operator rotated the log key, "
            f"check the new key out of band, then re-pin: {FORGET} {self.server}"
        )
