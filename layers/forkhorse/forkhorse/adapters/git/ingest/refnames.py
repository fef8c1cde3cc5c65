"""Ref names and commands: what a push may update, refused before its pack is read."""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

from dulwich.refs import Ref, check_ref_format

from forkhorse.adapters.git.ingest import PushRefused
from forkhorse.domain.limits import GIT, GitLimits

_WRITABLE = (b"refs/heads/", b"refs/tags/")
_MAX_REF_BYTES = 1000  # DynamoDB sort key: "REF#" + name stays under 1024 bytes
_MAX_REF_COMPONENT_BYTES = 255  # one file name on disk


def shown(name: bytes) -> str:
    """A ref name as a message may quote it: escaped, on one line, bounded."""
    text = repr(bytes(name))[2:-1]
    return text if len(text) <= 120 else text[:117] + "..."


def ref_name_problem(name: bytes) -> str | None:
    """Why a pushed ref name is refused (git's check-ref-format, UTF-8, no control or
    invisible characters, only branches and tags), or None."""
    if len(name) > _MAX_REF_BYTES:
        return f"ref name longer than {_MAX_REF_BYTES} bytes"
    if not name.startswith(_WRITABLE) or name in _WRITABLE:
        return f"{shown(name)}: only refs/heads/* and refs/tags/* can be pushed"
    if not check_ref_format(Ref(name)):
        return f"{shown(name)}: not a valid git ref name (git check-ref-format)"
    try:
        text = name.decode("utf-8")
    except UnicodeDecodeError:
        return f"{shown(name)}: a ref name must be UTF-8"
    if any(unicodedata.category(char)[0] in "CZ" for char in text):
        return f"{shown(name)}: a ref name cannot hold control, invisible or space characters"
    if any(len(part) > _MAX_REF_COMPONENT_BYTES for part in name.split(b"/")):
        return f"{shown(name)}: a ref name component is longer than 255 bytes"
    return None


Command = tuple[bytes, bytes, bytes]  # (old, new, ref) as dulwich's receive-pack reads them


def check_commands(commands: Sequence[Command], limits: GitLimits = GIT) -> None:
    """Refuse the whole push before its pack is read: too many updates or a bad ref name."""
    if len(commands) > limits.ref_updates:
        raise PushRefused(
            f"this push updates {len(commands)} refs; the limit is {limits.ref_updates} "
            "per push (push fewer refs at a time)"
        )
    seen: set[bytes] = set()
    for old, new, name in commands:
        problem = ref_name_problem(name)
        if problem is not None:
            raise PushRefused(f"refused ref name {problem}")
        if name in seen:
            raise PushRefused(f"{shown(name)} is updated twice in one push")
        seen.add(name)
        if not (_is_hex(old) and _is_hex(new)):
            raise PushRefused(f"{shown(name)}: object names must be 40 lowercase hex digits")


def _is_hex(value: bytes) -> bool:
    return len(value) == 40 and all(c in b"0123456789abcdef" for c in value)
