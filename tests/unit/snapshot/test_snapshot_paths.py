"""Every path rejection rule, in one table, plus the accepted shapes."""

from __future__ import annotations

import pytest
from forkhorse.domain.snapshot import (
    PathRejected,
    SnapshotError,
    is_safe_entry_name,
    validate_path,
    validate_prefix,
)

REJECTED = [
    ("", "empty path"),
    ("/etc/passwd", "absolute"),
    ("/", "absolute root"),
    ("..", "traversal"),
    ("../x", "leading traversal"),
    ("a/../b", "inner traversal"),
    ("a/..", "trailing traversal"),
    (".", "current dir"),
    ("a/./b", "inner current dir"),
    ("a//b", "empty component"),
    ("a/", "trailing slash"),
    ("a\\b", "backslash"),
    ("..\\x", "backslash traversal"),
    ("a\x00b", "NUL"),
    ("a\nb", "newline"),
    ("a\tb", "tab"),
    ("a\x1bb", "escape"),
    ("a\x7fb", "DEL"),
    ("a\x85b", "C1 control"),
    (".git", ".git"),
    (".git/config", ".git first"),
    ("sub/.git/HEAD", ".git inner"),
    (".GIT/config", ".git upper case"),
    ("sub/.Git", ".git mixed case"),
    ("/".join(["d"] * 65), "65 levels"),
]

ACCEPTED = [
    ("a.txt", ("a.txt",)),
    ("src/main.py", ("src", "main.py")),
    (".gitignore", (".gitignore",)),
    (".github/workflows/ci.yml", (".github", "workflows", "ci.yml")),
    ("a..b", ("a..b",)),
    ("...", ("...",)),
    ("名前/ファイル.txt", ("名前", "ファイル.txt")),
    ("/".join(["d"] * 64), tuple(["d"] * 64)),
]


@pytest.mark.parametrize(("path", "rule"), REJECTED, ids=[rule for _, rule in REJECTED])
def test_rejected_paths(path: str, rule: str) -> None:
    with pytest.raises(PathRejected) as rejected:
        validate_path(path)
    assert isinstance(rejected.value, SnapshotError)
    assert str(rejected.value).endswith(".")  # a sentence, never the raw input
    assert len(path) < 5 or path not in str(rejected.value)  # never echoes the input


@pytest.mark.parametrize(("path", "components"), ACCEPTED)
def test_accepted_paths(path: str, components: tuple[str, ...]) -> None:
    assert validate_path(path) == components


@pytest.mark.parametrize("value", [None, 3, b"a.txt", ["a"]])
def test_non_strings_are_rejected(value: object) -> None:
    with pytest.raises(PathRejected):
        validate_path(value)
    with pytest.raises(PathRejected):
        validate_prefix(value)


def test_prefixes_are_literal_but_safe() -> None:
    assert validate_prefix("") == ""
    assert validate_prefix("src/") == "src/"
    assert validate_prefix("src/ma") == "src/ma"
    for bad in ("/", "/src", "../", "a//", ".git/", "a\\", "x\x00"):
        with pytest.raises(PathRejected):
            validate_prefix(bad)


@pytest.mark.parametrize(
    ("name", "safe"),
    [
        ("a", True),
        (".gitmodules", True),
        ("", False),
        (".", False),
        ("..", False),
        (".git", False),
        (".GIT", False),
        ("a/b", False),
        ("a\\b", False),
        ("a\x01", False),
    ],
)
def test_tree_entry_names(name: str, safe: bool) -> None:
    assert is_safe_entry_name(name) is safe
