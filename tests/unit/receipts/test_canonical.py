"""Canonical bytes, digests and UTF-16 chunks."""

import hashlib
import json

import pytest
from forkhorse.domain.canonical import (
    CHUNK_CODE_UNITS,
    RecordCorruptedError,
    canonical_bytes,
    chunk_bytes,
    chunk_text,
    digest_of,
    reference_canonical_bytes,
    verified_bytes,
)
from forkhorse.records import PARALLEL_DIGEST_BYTES, digest_and_chunks
from hypothesis import given
from hypothesis import strategies as st

WORST_CASE_UTF8 = 128 * 1024


def _units(text: str) -> int:
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def test_canonical_form_is_sorted_compact_utf8() -> None:
    value = {"b": [1, {"z": None, "a": "é\u202e"}], "a": True}
    data = canonical_bytes(value)
    assert data == '{"a":true,"b":[1,{"a":"é\u202e","z":null}]}'.encode()
    assert hashlib.sha256(data).hexdigest() == hashlib.sha256(canonical_bytes(value)).hexdigest()
    with pytest.raises(ValueError, match="Out of range"):
        canonical_bytes({"x": float("nan")})


@pytest.mark.parametrize("character", ["€", "𝄞", "a"])  # 3, 4 and 1 UTF-8 bytes
def test_worst_case_chunks_stay_under_128_kib(character: str) -> None:
    text = "x" + character * (3 * CHUNK_CODE_UNITS)  # the "x" puts pairs across boundaries
    chunks = chunk_text(text)
    assert "".join(chunks) == text
    for chunk in chunks:
        assert _units(chunk) <= CHUNK_CODE_UNITS
        assert len(chunk.encode("utf-8")) < WORST_CASE_UTF8
    assert max(len(chunk.encode()) for chunk in chunks) <= CHUNK_CODE_UNITS * 3


def test_a_surrogate_pair_is_never_split() -> None:
    text = "a" * (CHUNK_CODE_UNITS - 1) + "𝄞" + "b"
    chunks = chunk_text(text)
    assert chunks == ["a" * (CHUNK_CODE_UNITS - 1), "𝄞b"]
    assert all(chunk.encode("utf-8") for chunk in chunks)


@given(st.text(), st.integers(min_value=2, max_value=40))
def test_chunks_join_back_and_respect_the_unit_limit(text: str, limit: int) -> None:
    chunks = chunk_text(text, limit)
    assert "".join(chunks) == text
    assert all(0 < _units(chunk) <= limit for chunk in chunks)
    for chunk in chunks:
        chunk.encode("utf-8", "surrogatepass")
        assert not (0xD800 <= ord(chunk[-1]) <= 0xDBFF) or ord(chunk[-1]) > 0xFFFF


def test_verification_refuses_a_mismatch_and_a_lone_surrogate() -> None:
    data = canonical_bytes({"a": 1})
    digest = hashlib.sha256(data).hexdigest()
    assert verified_bytes(digest, chunk_text(data.decode())) == data
    with pytest.raises(RecordCorruptedError):
        verified_bytes(digest, ['{"a":2}'])
    with pytest.raises(RecordCorruptedError):
        verified_bytes(digest, ['{"a":"\ud800"}'])
    assert json.loads(data) == {"a": 1}


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=12,
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


@given(st.text(), st.integers(min_value=2, max_value=40))
def test_chunking_bytes_gives_the_chunks_of_the_text(text: str, limit: int) -> None:
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        return  # canonical bytes never hold a lone surrogate
    assert chunk_bytes(data, limit) == chunk_text(text, limit)


def test_chunking_bytes_keeps_the_chunks_across_decode_windows() -> None:
    text = ("ü✓a" * 70_000) + "end"  # mixed widths across many 64 KiB windows
    assert chunk_bytes(text.encode()) == chunk_text(text)
    astral = "x" + "𝄞" * 40_000
    assert chunk_bytes(astral.encode()) == chunk_text(astral)


@pytest.mark.parametrize("size", [PARALLEL_DIGEST_BYTES - 1, PARALLEL_DIGEST_BYTES + 7])
def test_a_big_record_hashed_on_a_second_thread_gets_the_serial_digest_and_chunks(
    size: int,
) -> None:
    cut = ("ü✓a𝄞" * size).encode()[:size]
    data = cut.decode("utf-8", "ignore").encode()  # a character cut in two is dropped
    assert digest_and_chunks(data) == (digest_of(data), chunk_text(data.decode()))
