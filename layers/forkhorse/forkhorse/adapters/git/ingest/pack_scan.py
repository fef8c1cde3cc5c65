"""Step 1: scan the pushed pack as it streams, refusing it at the first limit passed."""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import BinaryIO

from forkhorse.adapters.git.ingest import (
    _OFS_DELTA,
    _REF_DELTA,
    _SHA_BYTES,
    _STEP,
    _TYPE_NAMES,
    PushRefused,
)
from forkhorse.adapters.git.probe import MAX_VARINT_BYTES, delta_varint
from forkhorse.domain.limits import GitLimits

_DELTA_HEAD = 20  # two size varints


class _Wire:
    """The pushed pack as it arrives: bytes are consumed in order, hashed and spooled."""

    def __init__(self, read: Callable[[int], bytes], sink: BinaryIO, limit: int | None) -> None:
        self._read = read
        self._sink = sink
        self._limit = limit
        self._buffer = b""
        self._at = 0
        self._received = 0
        self.digest = hashlib.sha1()  # noqa: S324 - git's pack checksum
        self.position = 0

    def _fill(self) -> None:
        data = self._read(_STEP)
        if not data:
            raise PushRefused("the pack ends before its last object (truncated push)")
        self._received += len(data)
        if self._limit is not None and self._received > self._limit:
            raise PushRefused(
                f"the pushed pack is larger than {self._limit} bytes, the server's limit; "
                "push fewer commits at a time"
            )
        self._buffer = self._buffer[self._at :] + data
        self._at = 0

    def peek(self) -> memoryview:
        if self._at >= len(self._buffer):
            self._fill()
        return memoryview(self._buffer)[self._at :]

    def consume(self, count: int, *, hashed: bool = True) -> bytes:
        while len(self._buffer) - self._at < count:
            self._fill()
        data = self._buffer[self._at : self._at + count]
        self._at += count
        if hashed:
            self.digest.update(data)
        self._sink.write(data)
        self.position += count
        return data

    def byte(self) -> int:
        return self.consume(1)[0]


@dataclass(slots=True)
class _Entry:
    offset: int
    kind: int  # 1-4 a whole object, 6 OFS_DELTA, 7 REF_DELTA
    data_start: int
    data_end: int
    stream_size: int  # what its zlib stream inflates to
    size: int  # the object's size: a whole object's, or a delta's result
    base: int | bytes | None  # OFS_DELTA: the base's entry index; REF_DELTA: its raw SHA
    depth: int  # deltas below it that the scan can see (OFS chains); 0 for a whole object


@dataclass
class _Budget:
    limits: GitLimits
    inflated: int = 0

    def charge(self, size: int, what: str) -> None:
        self.inflated += size
        if self.inflated > self.limits.push_inflated_bytes:
            raise PushRefused(
                f"the push inflates to more than {self.limits.push_inflated_bytes} bytes "
                f"(at {what}), the server's limit per push; push fewer or smaller objects"
            )


def _scan(wire: _Wire, limits: GitLimits) -> list[_Entry]:
    """Read the whole pack from the wire, refusing it at the first limit passed."""
    header = wire.consume(12)
    if header[:4] != b"PACK" or int.from_bytes(header[4:8]) not in (2, 3):
        raise PushRefused("the pushed data is not a git pack (bad header)")
    count = int.from_bytes(header[8:12])
    if count > limits.push_objects:
        raise PushRefused(
            f"the pack holds {count} objects; the limit is {limits.push_objects} objects "
            "per push (push fewer commits at a time)"
        )
    budget = _Budget(limits)
    entries: list[_Entry] = []
    index_at: dict[int, int] = {}
    for number in range(count):
        entry = _scan_entry(wire, limits, budget, entries, index_at, number)
        index_at[entry.offset] = len(entries)
        entries.append(entry)
    expected = wire.digest.digest()
    if wire.consume(_SHA_BYTES, hashed=False) != expected:
        raise PushRefused("the pack's checksum does not match its content (corrupt push)")
    return entries


def _scan_entry(
    wire: _Wire,
    limits: GitLimits,
    budget: _Budget,
    entries: list[_Entry],
    index_at: dict[int, int],
    number: int,
) -> _Entry:
    offset = wire.position
    first = wire.byte()
    kind = (first >> 4) & 0x07
    stream_size = first & 0x0F
    shift = 4
    byte = first
    while byte & 0x80:
        if shift > 7 * MAX_VARINT_BYTES:
            raise PushRefused(f"object {number} has a malformed size in its header")
        byte = wire.byte()
        stream_size |= (byte & 0x7F) << shift
        shift += 7
    what = f"object {number} of the pack"
    base: int | bytes | None = None
    depth = 0
    if kind == _OFS_DELTA:
        base = _ofs_base(wire, offset, index_at, number)
        depth = entries[base].depth + 1
    elif kind == _REF_DELTA:
        base = wire.consume(_SHA_BYTES)
        depth = 1
    elif kind not in _TYPE_NAMES:
        raise PushRefused(f"object {number} has an unknown type {kind}")
    if depth > limits.delta_depth:
        raise PushRefused(
            f"{what} is a delta {depth} deep; the limit is {limits.delta_depth} "
            "(repack with a smaller --depth)"
        )
    delta = kind in (_OFS_DELTA, _REF_DELTA)
    # a delta's instructions may be a little larger than the object they build
    stream_limit = limits.object_bytes + (limits.object_bytes >> 6 if delta else 0)
    if stream_size > stream_limit:
        raise _too_large(what, stream_size, limits)
    budget.charge(stream_size, what)
    data_start = wire.position
    head = _inflate_stream(wire, stream_size, _DELTA_HEAD if delta else 0, what)
    size = stream_size
    if delta:
        base_size, position = _varint(head, 0, what)
        size, _ = _varint(head, position, what)
        if size > limits.object_bytes:
            raise _too_large(what, size, limits)
        if isinstance(base, int) and entries[base].size != base_size:
            raise PushRefused(f"{what} is a delta whose base size does not match its base")
        budget.charge(size, what)
    return _Entry(offset, kind, data_start, wire.position, stream_size, size, base, depth)


def _too_large(what: str, size: int, limits: GitLimits) -> PushRefused:
    return PushRefused(
        f"{what} inflates to {size} bytes; the limit is {limits.object_bytes} bytes per object"
    )


def _ofs_base(wire: _Wire, offset: int, index_at: dict[int, int], number: int) -> int:
    byte = wire.byte()
    distance = byte & 0x7F
    for _ in range(MAX_VARINT_BYTES):
        if not byte & 0x80:
            break
        byte = wire.byte()
        distance = ((distance + 1) << 7) | (byte & 0x7F)
    else:
        raise PushRefused(f"object {number} has a malformed delta base offset")
    found = index_at.get(offset - distance)
    if distance <= 0 or found is None:
        raise PushRefused(f"object {number} is a delta whose base is not an earlier object")
    return found


def _inflate_stream(wire: _Wire, declared: int, keep: int, what: str) -> bytes:
    """Inflate one zlib stream from the wire in bounded steps; keep its first `keep` bytes."""
    inflater = zlib.decompressobj()
    produced = 0
    head = bytearray()
    while not inflater.eof:
        chunk = wire.peek()
        data: bytes | memoryview = chunk
        while True:
            try:
                out = inflater.decompress(data, _STEP)
            except zlib.error as corrupt:
                raise PushRefused(f"{what} is not valid zlib data") from corrupt
            produced += len(out)
            if produced > declared:
                raise PushRefused(f"{what} inflates past the {declared} bytes its header declares")
            if len(head) < keep:
                head += out[: keep - len(head)]
            data = inflater.unconsumed_tail
            if inflater.eof or (not data and len(out) < _STEP):
                break
        used = len(chunk) - len(inflater.unused_data) if inflater.eof else len(chunk)
        del chunk
        wire.consume(used)
    if produced != declared:
        raise PushRefused(f"{what} inflates to {produced} bytes, not the {declared} declared")
    return bytes(head)


def _varint(data: bytes, position: int, what: str) -> tuple[int, int]:
    parsed = delta_varint(data, position)
    if parsed is None:
        raise PushRefused(f"{what} is a delta with a malformed header")
    return parsed
