"""Bearer tokens: random, shown once, stored only as SHA-256 hashes."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass

from forkhorse.domain.model import PrincipalKind

TOKEN_PREFIX = "fh_"  # noqa: S105 - a prefix that makes leaked tokens recognizable


@dataclass(frozen=True)
class Caller:
    """Who is calling, as resolved from a token or an authorizer's context."""

    id: str
    kind: PrincipalKind

    @property
    def is_owner(self) -> bool:
        return self.kind == "owner"

    @property
    def is_agent(self) -> bool:
        return self.kind == "agent"


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def token_hash(token: str) -> str:
    """What the Store keeps. Lookups go by this hash, so the token itself is never compared:
    a timing difference could reveal only hash prefixes, not the token."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def new_id(prefix: str) -> str:
    """A short random id, safe as a URL path segment and a git repository name."""
    return f"{prefix}-{secrets.token_hex(6)}"
