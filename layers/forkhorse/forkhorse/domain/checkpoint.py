"""C2SP tlog-checkpoint bodies: the text a log signs to commit to its tree at a size.

A body is the origin (the log's name), the tree size in decimal and the root hash in
standard base64, one per line, then optional extension lines; every line ends with `\\n`
and none is empty. Parsing is strict, so one tree head has exactly one body: a size with a
leading zero, a hash that is not 32 bytes or not canonical base64, or a blank line is
refused rather than read leniently (c2sp.org/tlog-checkpoint).
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass

ROOT_BYTES = 32
_SIZE = re.compile(r"0|[1-9][0-9]{0,19}")


class CheckpointRefused(ValueError):
    """The text is not a checkpoint body; the message says why."""


@dataclass(frozen=True)
class Checkpoint:
    origin: str
    size: int
    root: bytes
    extensions: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for line in (self.origin, *self.extensions):
            if not line or "\n" in line:
                raise CheckpointRefused("a checkpoint line is empty or holds a newline")
        if self.size < 0:
            raise CheckpointRefused("a tree size is not negative")
        if len(self.root) != ROOT_BYTES:
            raise CheckpointRefused(f"a root hash is {ROOT_BYTES} bytes")

    def body(self) -> str:
        lines = [self.origin, str(self.size), base64.b64encode(self.root).decode()]
        return "".join(f"{line}\n" for line in [*lines, *self.extensions])


def parse_checkpoint(text: str) -> Checkpoint:
    """The checkpoint a body states, or CheckpointRefused naming the first problem."""
    if not text.endswith("\n"):
        raise CheckpointRefused("a checkpoint body ends with a newline")
    lines = text[:-1].split("\n")
    if len(lines) < 3:
        raise CheckpointRefused("a checkpoint body has an origin, a size and a root hash")
    origin, size, root, *extensions = lines
    if not _SIZE.fullmatch(size):
        raise CheckpointRefused(f"the tree size {size!r} is not a decimal without leading zeros")
    return Checkpoint(origin, int(size), _root(root), tuple(extensions))


def _root(encoded: str) -> bytes:
    try:
        root = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError) as invalid:
        raise CheckpointRefused("the root hash is not standard base64") from invalid
    if base64.b64encode(root).decode() != encoded:
        raise CheckpointRefused("the root hash is not canonical base64")
    return root


def stated_checkpoint(note: str) -> Checkpoint:
    """The checkpoint a signed note states, its signature not checked: for a note verified
    when it was stored, or where only its size matters."""
    return parse_checkpoint(note.split("\n\n", 1)[0] + "\n")
