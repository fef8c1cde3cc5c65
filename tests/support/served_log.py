"""A transparency log as a server keeps it, for the client's tests: the real SQLite ledger,
tiles on disk and `LogPublishing` signing with a fresh key, served through httpx's
MockTransport the way `/log/` is (and `GET /projects`, for a client call to witness).

A test makes the server misbehave by what it serves: `served_note` replaces the checkpoint,
`named_key` what `/log/key` names (None: the deployment keeps no log), `answers` any path."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import httpx
from forkhorse.adapters.disk_log import DiskLogFiles
from forkhorse.adapters.sqlite.transparency import SqliteLogLedger
from forkhorse.client.api import ForkhorseClient
from forkhorse.client.config import ClientConfig
from forkhorse.domain.checkpoint import Checkpoint
from forkhorse.domain.log_entries import ImportSubject, facts_digest, make_entry
from forkhorse.service.log_publishing import LogPublishing
from forkhorse.tlog.note import key_id, sign_note
from forkhorse.tlog.verify import CHECKPOINT_PATH, LogKey
from securesystemslib.signer import CryptoSigner

ORIGIN = "forkhorse.test/witness"
SERVICE = "https://service.test"


NOW = datetime(2026, 12, 2, tzinfo=UTC)


class FixedClock:
    def now(self) -> datetime:
        return NOW


def log_entry(index: int, project: str = "p") -> bytes:
    """A distinct, valid entry (a canonical import) for index `index`."""
    subject = ImportSubject(commit=f"{index:040x}")
    return make_entry(project, subject, facts_digest(subject), f"import/{index}").to_bytes()


def key_body(key: LogKey) -> dict[str, str]:
    return {
        "origin": key.origin,
        "publicKey": key.public_pem,
        "keyId": key_id(key.public_pem).hex(),
    }


@dataclass
class ServedLog:
    directory: Path
    signer: CryptoSigner
    origin: str = ORIGIN
    served_note: str | None = None
    named_key: LogKey | None = None
    answers: dict[str, httpx.Response] = field(default_factory=dict)
    asked: list[httpx.Request] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.ledger = SqliteLogLedger(self.directory / "ledger.sqlite3")
        self.files = DiskLogFiles(self.directory / "log")
        self.named_key = self.key
        self.publishing = LogPublishing(
            self.ledger, self.files, self.key, self.signer, FixedClock()
        )
        self.publishing.publish()

    @classmethod
    def create(cls, directory: Path, origin: str = ORIGIN) -> ServedLog:
        return cls(directory, CryptoSigner.generate_ecdsa(), origin)

    @property
    def key(self) -> LogKey:
        return LogKey(self.origin, self.signer.public_key.keyval["public"])

    def close(self) -> None:
        self.ledger.close()

    def append(self, count: int = 1) -> None:
        """`count` new entries, then a new signed checkpoint."""
        size = self.ledger.head().size
        self.append_entries([log_entry(index) for index in range(size, size + count)])

    def append_entries(self, entries: list[bytes]) -> None:
        for entry in entries:
            size = self.ledger.head().size
            assert self.ledger.append(size, f"k{size}", entry, NOW)
        self.publishing.publish()

    def note(self) -> str:
        data = self.files.read(CHECKPOINT_PATH)
        assert data is not None
        return data.decode()

    def sign(self, size: int, root: bytes, signer: CryptoSigner | None = None) -> str:
        """A checkpoint of `size` and `root`, signed with this log's key (or `signer`)."""
        text = Checkpoint(self.origin, size, root).body()
        return sign_note(text, self.origin, signer or self.signer)

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.asked.append(request)
        path = request.url.path
        if path in self.answers:
            return self.answers[path]
        if path == "/projects":
            return httpx.Response(200, json={"projects": []})
        if path == "/log/key":
            named = self.named_key
            return (
                httpx.Response(404) if named is None else httpx.Response(200, json=key_body(named))
            )
        if path == "/log/checkpoint":
            note = self.served_note or self.note()
            return httpx.Response(200, content=note.encode())
        data = self.files.read(path.removeprefix("/log/")) if path.startswith("/log/") else None
        return (
            httpx.Response(404, json={"error": "No."})
            if data is None
            else httpx.Response(200, content=data)
        )

    def paths(self) -> list[str]:
        return [request.url.path for request in self.asked]

    def client(self, state: Path) -> ForkhorseClient:
        """An API client of this service whose witness keeps `state`."""
        return ForkhorseClient(
            ClientConfig(SERVICE, "the-token"),
            transport=httpx.MockTransport(self.handle),
            witness_state=state,
        )


def state_of(path: Path) -> dict[str, object]:
    loaded: dict[str, object] = json.loads(path.read_text())
    return loaded
