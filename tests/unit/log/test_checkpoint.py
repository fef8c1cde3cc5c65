"""C2SP tlog-checkpoint bodies: written as the spec's example, read back exactly, and
every other spelling of a tree head refused, so one head has one body to sign."""

from __future__ import annotations

import base64

import pytest
from forkhorse.domain.checkpoint import Checkpoint, CheckpointRefused, parse_checkpoint
from hypothesis import given
from hypothesis import strategies as st

# The example of c2sp.org/tlog-checkpoint, without its signature line.
EXAMPLE = "example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"


def test_the_spec_example_reads_and_writes_back_byte_for_byte() -> None:
    checkpoint = parse_checkpoint(EXAMPLE)
    assert (checkpoint.origin, checkpoint.size) == ("example.com/behind-the-sofa", 20852163)
    assert len(checkpoint.root) == 32
    assert checkpoint.body() == EXAMPLE


def test_extension_lines_are_kept() -> None:
    body = EXAMPLE + "forkhorse: project=demo\n"
    assert parse_checkpoint(body).extensions == ("forkhorse: project=demo",)
    assert parse_checkpoint(body).body() == body


@given(
    st.text(st.characters(blacklist_characters="\n", blacklist_categories=["Cs"]), min_size=1),
    st.integers(0, 2**63),
    st.binary(min_size=32, max_size=32),
)
def test_any_tree_head_round_trips(origin: str, size: int, root: bytes) -> None:
    checkpoint = Checkpoint(origin, size, root)
    assert parse_checkpoint(checkpoint.body()) == checkpoint


ROOT = "CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I="


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (EXAMPLE[:-1], "ends with a newline"),
        ("example.com/log\n5\n", "an origin, a size and a root hash"),
        (f"example.com/log\n05\n{ROOT}\n", "without leading zeros"),
        (f"example.com/log\n+5\n{ROOT}\n", "without leading zeros"),
        (f"example.com/log\n-1\n{ROOT}\n", "without leading zeros"),
        (f"example.com/log\n 5\n{ROOT}\n", "without leading zeros"),
        ("example.com/log\n5\nCsUYapGGPo4dkMgIAUqom_Xajj7h2fB2MPA3j2jxq2I=\n", "standard base64"),
        (f"example.com/log\n5\n{base64.b64encode(bytes(31)).decode()}\n", "32 bytes"),
        (f"\n5\n{ROOT}\n", "empty"),
        (f"example.com/log\n5\n{ROOT}\n\n", "empty"),
    ],
)
def test_every_other_spelling_is_refused(body: str, why: str) -> None:
    with pytest.raises(CheckpointRefused, match=why):
        parse_checkpoint(body)
