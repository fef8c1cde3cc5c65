"""Read an object's type, size and a bounded prefix without materializing the whole object.

What is decompressed, in the worst case:

- A loose object (disk adapter) or a whole (non-delta) object in a pack: at most the
  object header plus `limit` bytes of output, reading compressed input in 16 KiB steps.
  `stat` asks for 8 KiB, so at most 8 KiB of content is materialized.
- A delta object in a pack (OFS_DELTA or REF_DELTA): the target size comes from the first
  bytes of the delta itself (about 20 bytes of output). Its sample (`delta_prefix`) cannot
  be a prefix of its stream, because delta instructions may copy from anywhere in the
  base; so each delta of the chain is inflated only until the instructions building the
  wanted bytes are read, and its base is asked for only the bytes those copy. At most
  `limit` bytes are kept per level; a base is inflated, 16 KiB at a time and discarded,
  only up to the last byte asked of it. The complete blob is never rebuilt, so `stat`
  charges a delta's sample like any other (issue 30).
"""

from __future__ import annotations

import bisect
import mmap
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

from dulwich.object_store import BaseObjectStore, DiskObjectStore, PackBasedObjectStore
from dulwich.objects import ObjectID, valid_hexsha
from dulwich.pack import Pack, PackFileDisappeared

from forkhorse.domain.snapshot import SnapshotUnavailable

_CHUNK = 16 * 1024
_OFS_DELTA = 6
_REF_DELTA = 7
_DELTA_TYPES = (_OFS_DELTA, _REF_DELTA)
_SHA_BYTES = 20
_DELTA_HEAD_BYTES = 20  # two size varints, at most 10 bytes each
_MAX_DELTA_CHAIN = 10_000
_LOOSE_HEADER_LIMIT = 32
_TYPE_NAMES = {b"commit": 1, b"tree": 2, b"blob": 3, b"tag": 4}


@dataclass(frozen=True)
class ObjectProbe:
    type_num: int
    size: int
    prefix: bytes | None  # None: a delta, whose prefix needs the whole chain resolved


def probe_object(store: BaseObjectStore, sha: str, limit: int) -> ObjectProbe:
    """Type, size and up to `limit` leading bytes of one object; fail closed when missing."""
    if not valid_hexsha(sha):
        raise SnapshotUnavailable()
    hexsha = sha.encode("ascii")
    for _ in range(2):  # a repack may remove the pack found before it is read: look again
        location = _locate_packed(store, hexsha)
        if location is None:
            break
        try:
            return _probe_packed(store, location, limit)
        except PackFileDisappeared as gone:
            _forget(store, gone.obj)
            continue
    if isinstance(store, DiskObjectStore):
        return _probe_loose(store, hexsha, limit)
    raise SnapshotUnavailable()


def read_raw(store: BaseObjectStore, sha: str) -> bytes:
    """The whole content of one object; fail closed when it is missing or corrupt."""
    try:
        _, raw = store.get_raw(ObjectID(sha.encode("ascii")))
    except (KeyError, ValueError, zlib.error) as missing:
        raise SnapshotUnavailable() from missing
    return bytes(raw)


_Location = tuple[Pack, int]


def _locate_packed(store: BaseObjectStore, hexsha: bytes) -> _Location | None:
    # Packs already open first: refreshing the pack list (`packs`) costs a directory scan on
    # disk and a LIST request on S3, and is only needed when an object is not found.
    cached: dict[str, Pack] = getattr(store, "_pack_cache", {})
    found = _find(list(cached.values()), hexsha)
    if found is None:
        found = _find(list(getattr(store, "packs", ())), hexsha)
    return found


def _find(packs: list[Pack], hexsha: bytes) -> _Location | None:
    for pack in packs:
        try:
            return pack, int(pack.index.object_offset(ObjectID(hexsha)))
        except (KeyError, PackFileDisappeared):
            continue
    return None


def _forget(store: BaseObjectStore, gone: object) -> None:
    """Drop a pack whose files a repack deleted (its index was open, its data not yet), and
    rescan the pack list: the next look finds the object in the pack that replaced it.
    Without this a store kept open would find the same vanished pack again and again."""
    evict = getattr(store, "_evict_pack", None)
    if evict is not None:
        evict(gone)
    if isinstance(store, PackBasedObjectStore):
        store.packs  # noqa: B018 - reading it rescans: packs whose files went are dropped


def _probe_packed(store: BaseObjectStore, location: _Location, limit: int) -> ObjectProbe:
    buffer, type_num, size, position = _entry_data(location)
    if type_num not in _DELTA_TYPES:
        return ObjectProbe(type_num, size, _inflate_prefix(buffer, position, min(size, limit)))
    target_size = _delta_target_size(buffer, position)
    return ObjectProbe(_resolved_type(store, location), target_size, None)


def _entry_data(location: _Location) -> tuple[bytes | mmap.mmap, int, int, int]:
    """A pack entry's buffer, type, size and where its zlib data starts (after a delta's
    base reference)."""
    pack, offset = location
    buffer = pack.data._buffer()
    type_num, size, position = _pack_header(buffer, offset)
    if type_num == _OFS_DELTA:
        position = _ofs_delta_base(buffer, offset, position)[1]
    elif type_num == _REF_DELTA:
        position += _SHA_BYTES
    return buffer, type_num, size, position


def _delta_target_size(buffer: bytes | mmap.mmap, position: int) -> int:
    """The size of what a delta builds, from the varints at the head of its data."""
    head = _inflate_prefix(buffer, position, _DELTA_HEAD_BYTES)
    _, after_base_size = _delta_varint(head, 0)
    return _delta_varint(head, after_base_size)[0]


def _resolved_type(store: BaseObjectStore, location: _Location) -> int:
    """Follow a delta chain through headers only, to the base object's type."""
    for _ in range(_MAX_DELTA_CHAIN):
        pack, offset = location
        buffer = pack.data._buffer()
        type_num, _, position = _pack_header(buffer, offset)
        if type_num == _OFS_DELTA:
            location = (pack, _ofs_delta_base(buffer, offset, position)[0])
        elif type_num == _REF_DELTA:
            base = bytes(buffer[position : position + _SHA_BYTES]).hex().encode("ascii")
            found = _locate_packed(store, base)
            if found is None:
                raise SnapshotUnavailable()
            location = found
        else:
            return type_num
    raise SnapshotUnavailable()


def _pack_header(buffer: bytes | mmap.mmap, offset: int) -> tuple[int, int, int]:
    byte = buffer[offset]
    type_num = (byte >> 4) & 0x07
    size = byte & 0x0F
    shift = 4
    position = offset + 1
    while byte & 0x80:
        byte = buffer[position]
        size |= (byte & 0x7F) << shift
        shift += 7
        position += 1
    return type_num, size, position


def _ofs_delta_base(buffer: bytes | mmap.mmap, offset: int, position: int) -> tuple[int, int]:
    """The base object's offset and the position after the encoded distance."""
    byte = buffer[position]
    distance = byte & 0x7F
    while byte & 0x80:
        position += 1
        byte = buffer[position]
        distance = ((distance + 1) << 7) | (byte & 0x7F)
    return offset - distance, position + 1


MAX_VARINT_BYTES = 10  # a 64-bit size; longer is malformed, not a bigger number


def delta_varint(data: bytes, position: int) -> tuple[int, int] | None:
    """A size from a delta header (base or result) and the position after it; None when
    the header is truncated or longer than any real size."""
    value = 0
    shift = 0
    while position < len(data) and shift <= 7 * MAX_VARINT_BYTES:
        byte = data[position]
        value |= (byte & 0x7F) << shift
        shift += 7
        position += 1
        if not byte & 0x80:
            return value, position
    return None


def _delta_varint(data: bytes, position: int) -> tuple[int, int]:
    parsed = delta_varint(data, position)
    if parsed is None:
        raise SnapshotUnavailable()
    return parsed


def _inflate_prefix(buffer: bytes | mmap.mmap, start: int, want: int) -> bytes:
    """Decompress at most `want` bytes of the zlib stream that begins at `start`."""
    chunks = (bytes(buffer[at : at + _CHUNK]) for at in range(start, len(buffer), _CHUNK))
    return _inflate(chunks, want)


def _inflate(chunks: Iterator[bytes], want: int) -> bytes:
    inflater = zlib.decompressobj()
    output = bytearray()
    try:
        while len(output) < want and not inflater.eof:
            pending = inflater.unconsumed_tail or next(chunks, b"")
            if not pending:
                raise SnapshotUnavailable()
            output += inflater.decompress(pending, want - len(output))
    except zlib.error as corrupt:
        raise SnapshotUnavailable() from corrupt
    return bytes(output)


def _probe_loose(store: DiskObjectStore, hexsha: bytes, limit: int) -> ObjectProbe:
    try:
        with open(store._get_shafile_path(ObjectID(hexsha)), "rb") as handle:
            chunks = iter(lambda: handle.read(_CHUNK), b"")
            head = _inflate(chunks, _LOOSE_HEADER_LIMIT + limit)
    except FileNotFoundError as missing:
        raise SnapshotUnavailable() from missing
    type_name, _, rest = head.partition(b" ")
    size_text, separator, content = rest.partition(b"\0")
    if type_name not in _TYPE_NAMES or not separator or not size_text.isdigit():
        raise SnapshotUnavailable()
    size = int(size_text)
    return ObjectProbe(_TYPE_NAMES[type_name], size, content[: min(size, limit)])


# --- The leading bytes of a delta's result, without rebuilding it --------------------------

_Range = tuple[int, int]  # [start, end) of an object's content


def delta_prefix(store: BaseObjectStore, sha: str, limit: int) -> bytes:
    """The first `limit` bytes of a packed delta object's content, never the whole blob.

    Each delta in the chain is inflated only as far as the instructions that build the
    wanted bytes, and only the bytes those instructions copy are asked of its base; a whole
    object at the chain's end is inflated as far as the last byte asked of it, keeping only
    the asked bytes. Memory is bounded by `limit` per level (each level asks its base for
    at most the bytes it was asked for); the work, by the chain's inflated sizes."""
    hexsha = sha.encode("ascii")
    for _ in range(2):
        location = _locate_packed(store, hexsha)
        if location is None:
            break
        try:
            size = _content_size(location)
            want = min(size, limit)
            if want == 0:
                return b""
            return _ranges_of(store, location, [(0, want)], 0).slice(0, want)
        except PackFileDisappeared as gone:
            _forget(store, gone.obj)
            continue
    raise SnapshotUnavailable()


class _Pieces:
    """The bytes of merged, sorted ranges of one object's content."""

    def __init__(self, ranges: list[_Range]) -> None:
        self.starts = [start for start, _ in ranges]
        self.ends = [end for _, end in ranges]
        self.data = [bytearray() for _ in ranges]

    def slice(self, start: int, end: int) -> bytes:
        index = bisect.bisect_right(self.starts, start) - 1
        if index < 0 or end > self.ends[index]:
            raise SnapshotUnavailable()
        data = self.data[index]
        at = start - self.starts[index]
        if at + (end - start) > len(data):
            raise SnapshotUnavailable()  # the object ended before the bytes asked of it
        return bytes(data[at : at + end - start])


def _merged(ranges: list[_Range]) -> list[_Range]:
    merged: list[_Range] = []
    for start, end in sorted(ranges):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _content_size(location: _Location) -> int:
    buffer, type_num, size, position = _entry_data(location)
    return size if type_num not in _DELTA_TYPES else _delta_target_size(buffer, position)


def _ranges_of(
    store: BaseObjectStore, location: _Location, ranges: list[_Range], depth: int
) -> _Pieces:
    """The bytes of `ranges` (merged, sorted) of the object at `location`."""
    if depth > _MAX_DELTA_CHAIN:
        raise SnapshotUnavailable()
    pieces = _Pieces(ranges)
    if not ranges:
        return pieces
    pack, offset = location
    buffer = pack.data._buffer()
    type_num, _, position = _pack_header(buffer, offset)
    if type_num == _OFS_DELTA:
        base_offset, position = _ofs_delta_base(buffer, offset, position)
        base: _Location = (pack, base_offset)
    elif type_num == _REF_DELTA:
        base_sha = bytes(buffer[position : position + _SHA_BYTES]).hex().encode("ascii")
        found = _locate_packed(store, base_sha)
        if found is None:
            raise SnapshotUnavailable()
        base = found
        position += _SHA_BYTES
    else:
        _collect_whole(_stream(buffer, position), ranges, pieces)
        return pieces
    plan = _delta_plan(_stream(buffer, position), ranges)
    copies = [(part, part + length) for _, part, length in plan if isinstance(part, int)]
    from_base = _ranges_of(store, base, _merged(copies), depth + 1)
    for index, part, length in plan:  # in order: each range's bytes are appended
        if isinstance(part, bytes):
            pieces.data[index] += part
        else:
            pieces.data[index] += from_base.slice(part, part + length)
    return pieces


def _stream(buffer: bytes | mmap.mmap, start: int) -> Iterator[bytes]:
    """The decompressed output of the zlib stream at `start`, in bounded steps."""
    inflater = zlib.decompressobj()
    at = start
    try:
        while not inflater.eof:
            pending = inflater.unconsumed_tail
            if not pending:
                pending = bytes(buffer[at : at + _CHUNK])
                at += _CHUNK
                if not pending:
                    raise SnapshotUnavailable()
            out = inflater.decompress(pending, _CHUNK)
            if out:
                yield out
    except zlib.error as corrupt:
        raise SnapshotUnavailable() from corrupt


def _collect_whole(stream: Iterator[bytes], ranges: list[_Range], pieces: _Pieces) -> None:
    """Keep `ranges` of a whole object's content, inflating only up to the last of them."""
    last = ranges[-1][1]
    position = 0
    for chunk in stream:
        end = position + len(chunk)
        for index, (start, stop) in enumerate(ranges):
            if stop <= position or start >= end:
                continue
            pieces.data[index] += chunk[max(start, position) - position : min(stop, end) - position]
        position = end
        if position >= last:
            return
    raise SnapshotUnavailable()  # the object is shorter than the bytes asked of it


# One step of a delta's plan: (range index, literal bytes, 0) or (range index, base offset, length).
_Step = tuple[int, bytes | int, int]


def _delta_plan(stream: Iterator[bytes], ranges: list[_Range]) -> list[_Step]:
    """Walk a delta's instructions until `ranges` of its result are covered: for each
    range, in order, the literal bytes and base spans that build it."""
    reader = _DeltaReader(stream)
    reader.varint()  # base size
    reader.varint()  # result size
    plan: list[_Step] = []
    last = ranges[-1][1]
    output = 0
    first = 0  # the first range not yet wholly built
    while output < last:
        command = reader.byte()
        if command & 0x80:
            source = 0
            for shift in range(4):
                if command & (1 << shift):
                    source |= reader.byte() << (8 * shift)
            length = 0
            for shift in range(3):
                if command & (1 << (4 + shift)):
                    length |= reader.byte() << (8 * shift)
            length = length or 0x10000
            literal: bytes | None = None
        elif command:
            length = command
            literal = reader.take(length)
            source = 0
        else:
            raise SnapshotUnavailable()  # a reserved instruction
        end = output + length
        index = first
        while index < len(ranges) and ranges[index][0] < end:
            start, stop = ranges[index]
            low, high = max(start, output), min(stop, end)
            if low < high:
                if literal is None:
                    plan.append((index, source + low - output, high - low))
                else:
                    plan.append((index, literal[low - output : high - output], 0))
            if stop <= end:
                first = index + 1
            index += 1
        output = end
    return plan


class _DeltaReader:
    def __init__(self, stream: Iterator[bytes]) -> None:
        self._stream = stream
        self._data = b""
        self._at = 0

    def _fill(self, count: int) -> None:
        while len(self._data) - self._at < count:
            chunk = next(self._stream, b"")
            if not chunk:
                raise SnapshotUnavailable()  # the delta ends inside an instruction
            self._data = self._data[self._at :] + chunk
            self._at = 0

    def byte(self) -> int:
        self._fill(1)
        value = self._data[self._at]
        self._at += 1
        return value

    def take(self, count: int) -> bytes:
        self._fill(count)
        value = self._data[self._at : self._at + count]
        self._at += count
        return value

    def varint(self) -> int:
        value = 0
        for shift in range(0, 7 * MAX_VARINT_BYTES, 7):
            byte = self.byte()
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
        raise SnapshotUnavailable()
