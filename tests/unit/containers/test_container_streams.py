"""Bounding a stream while it is read gives exactly what bounding it whole gives."""

from __future__ import annotations

from forkhorse.domain.logs import LogSample, bound_log
from hypothesis import given, settings
from hypothesis import strategies as st


def _repeated(seed: bytes, size: int) -> bytes:
    return (seed * (size // len(seed) + 1))[:size]


# Large chunks are built from small seeds, so Hypothesis draws little entropy for them.
CHUNKS = st.lists(
    st.one_of(
        st.binary(max_size=300),
        st.builds(_repeated, st.binary(min_size=1, max_size=64), st.integers(17_000, 40_000)),
        st.builds(
            lambda text, times: (text * times).encode(),
            st.text(alphabet="aé€😀\n", min_size=1, max_size=24),
            st.integers(200, 1_000),
        ),
    ),
    max_size=8,
)


@given(CHUNKS)
@settings(max_examples=40, deadline=None)
def test_sampling_equals_bounding_the_whole_stream(chunks: list[bytes]) -> None:
    sample = LogSample()
    for chunk in chunks:
        sample.feed(chunk)
    assert sample.bounded() == bound_log(b"".join(chunks))


def test_a_huge_stream_costs_two_windows_of_memory() -> None:
    sample = LogSample()
    block = b"0123456789" * 100_000
    for _ in range(100):  # 100 MB
        sample.feed(block)
    log = sample.bounded()
    assert log.total_bytes == 100_000_000
    assert log.dropped_bytes == 100_000_000 - 32 * 1024
    assert len(sample._head) + len(sample._tail) <= 64 * 1024
