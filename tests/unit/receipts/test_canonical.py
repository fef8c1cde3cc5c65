"""Canonical bytes, digests and byte chunks (and the text chunks earlier versions stored)."""

import hashlib
import json
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from forkhorse import records
from forkhorse.domain.canonical import (
    CHUNK_BYTES,
    RecordCorruptedError,
    canonical_bytes,
    canonical_pieces,
    chunked,
    digest_of,
    reference_canonical_bytes,
    verified_bytes,
)
from forkhorse.ports.store.records import CHUNK_ITEM_OVERHEAD_BYTES
from forkhorse.records import HASH_BATCH_BYTES
from hypothesis import given
from hypothesis import strategies as st

from tests.support.legacy_records import LEGACY_CHUNK_CODE_UNITS, legacy_text_chunks

DYNAMODB_ITEM_BYTES = 400 * 1024
SEED_WORST_CASE_CHUNK = 128 * 1024  # the seed: "even worst-case UTF-8 chunks stay under"


def test_canonical_form_is_sorted_compact_utf8() -> None:
    value = {"b": [1, {"z": None, "a": "é\u202e"}], "a": True}
    data = canonical_bytes(value)
    assert data == '{"a":true,"b":[1,{"a":"é\u202e","z":null}]}'.encode()
    assert hashlib.sha256(data).hexdigest() == hashlib.sha256(canonical_bytes(value)).hexdigest()
    with pytest.raises(ValueError, match="Out of range"):
        canonical_bytes({"x": float("nan")})


def test_a_chunk_item_is_far_below_dynamodb_s_item_limit() -> None:
    """A Binary attribute counts its raw bytes: a chunk and its keys stay under 400 KB."""
    assert CHUNK_BYTES + CHUNK_ITEM_OVERHEAD_BYTES < DYNAMODB_ITEM_BYTES
    assert CHUNK_BYTES < SEED_WORST_CASE_CHUNK


@pytest.mark.parametrize("character", ["€", "𝄞", "a"])  # 3, 4 and 1 UTF-8 bytes
def test_chunks_cut_the_bytes_every_16_kib_even_inside_a_character(character: str) -> None:
    data = ("x" + character * (3 * CHUNK_BYTES)).encode()
    chunks = chunked([data])
    assert b"".join(chunks) == data
    assert [len(chunk) for chunk in chunks[:-1]] == [CHUNK_BYTES] * (len(chunks) - 1)
    assert 0 < len(chunks[-1]) <= CHUNK_BYTES


@given(st.lists(st.binary(max_size=40)), st.integers(min_value=1, max_value=16))
def test_chunks_of_pieces_are_the_chunks_of_their_concatenation(
    pieces: list[bytes], size: int
) -> None:
    data = b"".join(pieces)
    chunks = chunked(pieces, size)
    assert b"".join(chunks) == data
    assert [bytes(chunk) for chunk in chunks] == [
        data[start : start + size] for start in range(0, len(data), size)
    ]


def test_verification_refuses_a_mismatch_and_a_lone_surrogate() -> None:
    data = canonical_bytes({"a": 1})
    digest = hashlib.sha256(data).hexdigest()
    assert verified_bytes(digest, [data[:3], data[3:]]) == data
    with pytest.raises(RecordCorruptedError):
        verified_bytes(digest, [b'{"a":2}'])
    with pytest.raises(RecordCorruptedError):
        verified_bytes(digest, ['{"a":"\ud800"}'])
    assert json.loads(data) == {"a": 1}


@given(st.text(), st.integers(min_value=2, max_value=40))
def test_text_chunks_an_earlier_version_stored_verify_as_their_utf8(text: str, limit: int) -> None:
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        return  # canonical bytes never hold a lone surrogate
    chunks = legacy_text_chunks(data, limit)
    assert "".join(chunks) == text
    units = [len(chunk.encode("utf-16-le", "surrogatepass")) // 2 for chunk in chunks]
    assert all(0 < count <= limit for count in units)
    assert verified_bytes(digest_of(data), chunks) == data


def test_a_surrogate_pair_was_never_split_across_text_chunks() -> None:
    text = "a" * (LEGACY_CHUNK_CODE_UNITS - 1) + "𝄞" + "b"
    assert legacy_text_chunks(text.encode()) == ["a" * (LEGACY_CHUNK_CODE_UNITS - 1), "𝄞b"]


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=20) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=30,
)


@given(JSON_VALUES)
def test_the_fast_path_writes_exactly_the_reference_bytes(value: object) -> None:
    try:
        expected = reference_canonical_bytes(value)
    except (ValueError, UnicodeEncodeError) as error:  # lone surrogates stay refused
        with pytest.raises(type(error)):
            canonical_bytes(value)
        return
    assert canonical_bytes(value) == expected


@given(JSON_VALUES | st.tuples(st.integers()) | st.dictionaries(st.integers(), st.integers()))
def test_pieces_concatenate_to_exactly_the_canonical_bytes(value: object) -> None:
    try:
        expected = canonical_bytes(value)
    except (ValueError, UnicodeEncodeError) as error:
        with pytest.raises(type(error)):
            b"".join(canonical_pieces(value))
        return
    assert b"".join(canonical_pieces(value)) == expected


@pytest.mark.parametrize("batches", [0.5, 5.5])
def test_a_big_record_hashed_on_a_second_thread_gets_the_serial_digest_and_chunks(
    batches: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Below a batch the digest is taken here; above, batches go to the hashing thread."""
    hashed_on: list[str] = []
    hash_batch = records._Digest._hash_batch

    def spy(
        digest: records._Digest, batch: list[bytes | memoryview], taken: threading.Event
    ) -> None:
        hashed_on.append(threading.current_thread().name)
        hash_batch(digest, batch, taken)

    monkeypatch.setattr(records._Digest, "_hash_batch", spy)
    mixed = "ü✓a𝄞 \n" * int(batches * HASH_BATCH_BYTES / 40 / 13)  # 13 bytes of JSON each
    value = {"checks": [{"log": mixed, "n": index} for index in range(40)], "z": 1.5}
    data = canonical_bytes(value)
    assert (len(data) > HASH_BATCH_BYTES) == (batches > 1)
    digest, chunks = records.digest_and_chunks(value)
    assert (digest, b"".join(chunks)) == (digest_of(data), data)
    assert [bytes(chunk) for chunk in chunks] == [bytes(chunk) for chunk in chunked([data])]
    assert bool(hashed_on) == (batches > 1)
    assert all(name.startswith("record-digest") for name in hashed_on)


def _big_checks(tag: str) -> list[dict[str, object]]:
    return [{"log": f"{tag} ü✓ {index}\n" * 20_000} for index in range(16)]


def test_a_value_refused_after_batches_were_handed_over_leaves_the_hashing_thread_free() -> None:
    refused = {"checks": [*_big_checks("a"), {"x": float("nan")}]}
    with pytest.raises(ValueError, match="Out of range"):
        records.digest_and_chunks(refused)
    fine = {"checks": _big_checks("b")}
    assert records.digest_and_chunks(fine)[0] == digest_of(canonical_bytes(fine))


def test_records_digested_at_once_on_several_threads_get_their_own_digests() -> None:
    values = [{"checks": _big_checks(str(index))} for index in range(4)]
    with ThreadPoolExecutor(max_workers=4) as pool:
        digests = list(pool.map(lambda value: records.digest_and_chunks(value)[0], values))
    assert digests == [digest_of(canonical_bytes(value)) for value in values]
