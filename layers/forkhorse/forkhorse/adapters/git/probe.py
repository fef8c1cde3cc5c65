"""Read an object's type, size and a bounded prefix without materializing the whole object.

What is decompressed, in the worst case:

- A loose object (disk adapter) or a whole (non-delta) object in a pack: at most the
  object header plus `limit` bytes of output, reading compressed input in 16 KiB steps.
  `stat` asks for 8 KiB, so at most 8 KiB of content is materialized.
- A delta object in a pack (OFS_DELTA or REF_DELTA): the target size comes from the first
  bytes of the delta itself (about 20 bytes of output). The sample cannot be taken from a
  prefix, because delta instructions may copy from anywhere in the base, so dulwich
  resolves the whole chain: every delta in it and its base object are decompressed in
  full and the complete blob is rebuilt in memory. So `stat` charges a delta blob's whole
  size, refusing it before the rebuild when that is past the byte budget; the snapshot
  caches the result per blob so a repeated `stat` never redoes it.
"""

from __future__ import annotations

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
    pack, offset = location
    buffer = pack.data._buffer()
    type_num, size, position = _pack_header(buffer, offset)
    if type_num == _OFS_DELTA:
        position = _ofs_delta_base(buffer, offset, position)[1]
    elif type_num == _REF_DELTA:
        position += _SHA_BYTES
    else:
        return ObjectProbe(type_num, size, _inflate_prefix(buffer, position, min(size, limit)))
    delta_head = _inflate_prefix(buffer, position, _DELTA_HEAD_BYTES)
    _, after_base_size = _delta_varint(delta_head, 0)
    target_size, _ = _delta_varint(delta_head, after_base_size)
    return ObjectProbe(_resolved_type(store, location), target_size, None)


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
