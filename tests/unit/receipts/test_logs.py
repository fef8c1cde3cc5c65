"""Bounded logs keep at most 32 KiB of original bytes: head and tail, and say what was dropped."""

import pytest
from forkhorse.domain.logs import LOG_BUDGET_BYTES, BoundedLog, bound_log
from hypothesis import given
from hypothesis import strategies as st


def _kept_bytes(log: BoundedLog) -> int:
    return log.total_bytes - log.dropped_bytes


def test_a_short_stream_is_kept_whole() -> None:
    log = bound_log("héllo\n".encode())
    assert (log.text, log.total_bytes, log.dropped_bytes, log.dropped_at) == ("héllo\n", 7, 0, None)
    assert not log.truncated


def test_a_long_stream_keeps_its_head_and_tail() -> None:
    data = b"H" * 20_000 + b"M" * 100_000 + b"T" * 20_000
    log = bound_log(data)
    assert log.text == "H" * 16_384 + "T" * 16_384
    assert (log.dropped_at, log.dropped_bytes, log.total_bytes) == (16_384, 107_232, 140_000)
    assert log.model_dump() == {
        "text": log.text,
        "totalBytes": 140_000,
        "droppedBytes": 107_232,
        "droppedAt": 16_384,
    }


def test_a_cut_never_wastes_budget_on_half_a_character() -> None:
    data = "é".encode() * 40_000  # 2-byte characters; 16,384 is even, so shift by one
    log = bound_log(b"x" + data)
    assert "\ufffd" not in log.text
    assert _kept_bytes(log) >= LOG_BUDGET_BYTES - 3


def test_binary_garbage_decodes_with_replacement() -> None:
    log = bound_log(bytes(range(256)) * 300)
    assert "\ufffd" in log.text
    assert _kept_bytes(log) <= LOG_BUDGET_BYTES


@given(st.binary(max_size=70_000))
def test_never_more_than_32_kib_of_original_bytes(data: bytes) -> None:
    log = bound_log(data)
    assert _kept_bytes(log) <= LOG_BUDGET_BYTES
    assert log.total_bytes == len(data)
    if len(data) > LOG_BUDGET_BYTES:
        assert log.dropped_at is not None
        assert _kept_bytes(log) >= LOG_BUDGET_BYTES - 3
        head = data[: log.dropped_at]
        tail = data[log.dropped_at + log.dropped_bytes :]
        assert log.text == head.decode("utf-8", "replace") + tail.decode("utf-8", "replace")


@pytest.mark.parametrize("character", ["é", "€", "𝄞"])
@pytest.mark.parametrize("shift", range(4))
def test_valid_utf8_stays_valid_after_bounding(character: str, shift: int) -> None:
    data = b"x" * shift + character.encode() * 30_000 + b"y" * shift
    log = bound_log(data)
    assert "\ufffd" not in log.text
    assert _kept_bytes(log) >= LOG_BUDGET_BYTES - 3
