"""The README names each command as `forkhorse --help` lists it (issue 29: it said `gate`
for `review-gate`)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from forkhorse.cli import build_parser

README = Path(__file__).resolve().parents[3] / "README.md"
# `forkhorse NAME` inside backticks (or git's `!forkhorse NAME`), or run in a code block.
IN_PROSE = re.compile(r"`!?forkhorse ([a-z][a-z-]*)")
IN_CODE = re.compile(r"(?:^|&& |\| |\$ |'!)forkhorse ([a-z][a-z-]*)", re.M)
CODE_BLOCK = re.compile(r"^```[a-z]*\n(.*?)^```", re.M | re.S)


def _commands() -> set[str]:
    parser = build_parser()
    [subparsers] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return set(subparsers.choices)


def test_every_command_the_readme_names_is_one_forkhorse_has() -> None:
    text = README.read_text()
    named = set(IN_PROSE.findall(text))
    for block in CODE_BLOCK.findall(text):
        named |= set(IN_CODE.findall(block))
    assert "submit" in named  # the pattern finds them
    assert named - _commands() == set()
