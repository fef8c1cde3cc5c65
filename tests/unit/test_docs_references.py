"""Every command and path the docs name is real (issue 31).

The documents are README.md, CONTRIBUTING.md and every Markdown file under docs/. In their
code (inline spans and fenced blocks) and links:
- `make TARGET` names a target of the Makefile;
- `forkhorse COMMAND [SUBCOMMAND]` names a command of the real parser (`forkhorse --help`);
- a repository path exists: one starting at a top-level entry of the repository
  (`tests/...`, `layers/forkhorse/forkhorse/...`), or inside the package (`forkhorse/...`,
  `service/...`), and every relative link, with its `#anchor` when it names one.

Samples are left alone: URLs, absolute and home paths (`/tmp/...`, `~/...`), variables
(`$HOME`), placeholders (`<name>`, `...`) and globs (`*`, `?`, `[...]`, `{...}`).
"""

from __future__ import annotations

import argparse
import functools
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from forkhorse.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "layers" / "forkhorse" / "forkhorse"

FENCE = re.compile(r"^\s*(```+|~~~+)")
CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
# Where a shell command starts: the code's start, after an operator, a `$ ` prompt, git's
# `!` alias prefix, environment assignments or a wrapper script (`scripts/x.sh make test`).
COMMAND_START = (
    r"(?:^|&&|\|\||[|;(`]|\$\(|!)\s*(?:\$\s+)?(?:[A-Z_][A-Z0-9_]*=\S*\s+)*"
    r"(?:(?:time|exec|env|\S+\.sh)\s+)?"
)
MAKE = re.compile(COMMAND_START + r"make\s+([a-z][\w.-]*)")
FORKHORSE = re.compile(COMMAND_START + r"(?:\S*/)?forkhorse\s+([a-z][\w|-]*)(?:\s+([a-z][\w|-]*))?")
MAKE_RULE = re.compile(r"^([^\s:=#$][^:=]*?)\s*::?(?!=)")
# A sample, not a path of this repository.
SAMPLE = re.compile(r"://|^[/~$]|^\.\.|[*?\[\]{}<>$|…]|\.\.\.")
SHELL_COMMENT = re.compile(r"(?:^|\s)#.*$")
HEADING = re.compile(r"#{1,6}\s+(.*?)\s*#*\s*$")
LEADING, TRAILING = "\"'`(", "\"'`,;:)."


@dataclass(frozen=True)
class Problem:
    document: str
    line: int
    thing: str
    why: str

    def __str__(self) -> str:
        return f"{self.document}:{self.line}: {self.thing}: {self.why}"


@dataclass(frozen=True)
class Part:
    """A line of a fenced block, or a paragraph of prose (a span may wrap its lines)."""

    line: int
    text: str
    fenced: bool


@dataclass(frozen=True)
class Code:
    """One piece of code in a document: an inline span, or a line of a fenced block."""

    line: int
    text: str


def documents() -> list[Path]:
    found = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").rglob("*.md"))]
    return [path for path in found if path.is_file()]


def _name(document: Path) -> str:
    return document.relative_to(ROOT).as_posix()


def parts_of(text: str) -> Iterator[Part]:
    fence: str | None = None
    paragraph: list[str] = []
    start = 0
    for number, line in enumerate(text.splitlines(), start=1):
        opening = FENCE.match(line)
        if fence is None and (opening or not line.strip()) and paragraph:
            yield Part(start, "\n".join(paragraph), fenced=False)
            paragraph = []
        if opening and (fence is None or opening.group(1).startswith(fence)):
            fence = opening.group(1) if fence is None else None
        elif fence is not None:
            yield Part(number, line, fenced=True)
        elif line.strip():
            start = start if paragraph else number
            paragraph.append(line)
    if paragraph:
        yield Part(start, "\n".join(paragraph), fenced=False)


def _line_of(part: Part, offset: int) -> int:
    return part.line + part.text.count("\n", 0, offset)


def code_of(text: str) -> Iterator[Code]:
    for part in parts_of(text):
        if part.fenced:
            yield Code(part.line, SHELL_COMMENT.sub("", part.text))
            continue
        for span in CODE_SPAN.finditer(part.text):
            yield Code(_line_of(part, span.start()), " ".join(span.group(2).split()))


def _blanked(span: re.Match[str]) -> str:
    return re.sub(r"[^\n]", " ", span.group(0))


def links_of(text: str) -> Iterator[tuple[int, str]]:
    for part in parts_of(text):
        if not part.fenced:
            prose = CODE_SPAN.sub(_blanked, part.text)
            for link in LINK.finditer(prose):
                yield _line_of(part, link.start()), link.group(1)


@functools.cache
def make_targets() -> frozenset[str]:
    targets: set[str] = set()
    for line in (ROOT / "Makefile").read_text().splitlines():
        rule = MAKE_RULE.match(line)
        if rule:
            targets.update(rule.group(1).split())
    return frozenset(targets)


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


@functools.cache
def forkhorse_commands() -> dict[str, frozenset[str]]:
    """Each command of the real `forkhorse` parser, with its own subcommands."""
    return {
        name: frozenset(_subcommands(parser))
        for name, parser in _subcommands(build_parser()).items()
    }


@functools.cache
def top_level_entries() -> frozenset[str]:
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, text=True
    ).stdout
    return frozenset(path.split("/")[0] for path in listed.split("\0") if path)


@functools.cache
def package_entries() -> frozenset[str]:
    return frozenset(
        entry.name for entry in PACKAGE.iterdir() if entry.is_dir() or entry.suffix == ".py"
    )


def _bare(token: str) -> str:
    """A token without the quotes, brackets and punctuation around it."""
    return token.lstrip(LEADING).rstrip(TRAILING)


def repository_path(token: str) -> Path | None:
    """Where a token names a path of this repository, or None when it names none."""
    token = _bare(token).removeprefix("./")
    if not token or SAMPLE.search(token) or "/" not in token:
        return None
    first = token.split("/")[0]
    if first in top_level_entries():
        return ROOT / token
    if first == "forkhorse":
        return PACKAGE.parent / token
    if first in package_entries():
        return PACKAGE / token
    return None


def make_problems(document: Path, text: str) -> Iterator[Problem]:
    name = _name(document)
    for code in code_of(text):
        for target in MAKE.findall(code.text):
            if target not in make_targets():
                yield Problem(name, code.line, f"make {target}", "no such Makefile target")


def forkhorse_problems(document: Path, text: str) -> Iterator[Problem]:
    name, commands = _name(document), forkhorse_commands()
    for code in code_of(text):
        for command, sub in FORKHORSE.findall(code.text):
            for one in command.split("|"):
                if one not in commands:
                    yield Problem(name, code.line, f"forkhorse {one}", "no such command")
                elif sub and commands[one]:
                    for each in sub.split("|"):
                        if each not in commands[one]:
                            thing, why = f"forkhorse {one} {each}", "no such subcommand"
                            yield Problem(name, code.line, thing, why)


def path_problems(document: Path, text: str) -> Iterator[Problem]:
    name = _name(document)
    for code in code_of(text):
        for token in code.text.split():
            path = repository_path(token)
            if path is not None and not path.exists():
                yield Problem(name, code.line, _bare(token), "no such path")
    for line, target in links_of(text):
        yield from _link_problems(document, text, line, target)


def _link_problems(document: Path, text: str, line: int, target: str) -> Iterator[Problem]:
    if "://" in target or target.startswith("mailto:"):
        return
    where, _, anchor = target.partition("#")
    path = (document.parent / where).resolve()
    if where and not path.exists():
        yield Problem(_name(document), line, target, "the link's target does not exist")
    elif anchor and (not where or path.suffix == ".md"):
        headings = anchors(path.read_text() if where else text)
        if anchor not in headings:
            why = "no such heading in the linked document"
            yield Problem(_name(document), line, target, why)


def anchors(text: str) -> frozenset[str]:
    """The anchors GitHub gives a document's headings."""
    seen: dict[str, int] = {}
    found: set[str] = set()
    for part in parts_of(text):
        for line in [] if part.fenced else part.text.splitlines():
            heading = HEADING.match(line)
            if heading:
                slug = re.sub(r"[^\w\- ]", "", heading.group(1).lower()).replace(" ", "-")
                count = seen.get(slug, 0)
                seen[slug] = count + 1
                found.add(slug if count == 0 else f"{slug}-{count}")
    return frozenset(found)


def problems_of(document: Path, text: str) -> list[Problem]:
    return [
        *make_problems(document, text),
        *forkhorse_problems(document, text),
        *path_problems(document, text),
    ]


def test_every_make_target_forkhorse_command_and_path_the_docs_name_exists() -> None:
    problems = [p for document in documents() for p in problems_of(document, document.read_text())]
    assert not problems, "\n".join(["The docs name what does not exist:", *map(str, problems)])


def test_the_docs_are_read() -> None:
    """The scan finds what the README certainly names, so an empty result means something."""
    readme = (ROOT / "README.md").read_text()
    assert {"run", "test"} <= {t for c in code_of(readme) for t in MAKE.findall(c.text)}
    named = {command for c in code_of(readme) for command, _ in FORKHORSE.findall(c.text)}
    assert "submit" in named
    assert (ROOT / "docs" / "README.md") in documents()


SAMPLE_DOCUMENT = """\
# A sample

Run `make test`, `make nosuchtarget` and `scripts/beside-cpu-hogs.sh make nohog`.
`forkhorse submit`, `forkhorse nosuchcommand`, `forkhorse keys rotate|nosuchsub`.
`tests/unit/nosuch.py`, `layers/forkhorse/forkhorse/domain/limits.py`, `service/nosuch.py`.
Samples: `/tmp/x/y.py`, `~/.config/forkhorse/config.toml`, `events/<event>.json`,
`git/*/packs/*`, `refs/heads/main`, `$HOME/docs/x.md`, https://example.com/docs/x.md.
The forkhorse package is named in prose, and make is a word.
[missing](docs/nosuch.md), [anchor](README.md#no-such-heading), [fine](#a-sample).

```sh
FORKHORSE_PROFILE=owner forkhorse nosuchowner $R   # a comment: make believe
cd work && forkhorse submit --project $P && make nosuchfenced
```
"""


SAMPLE_PROBLEMS = [
    "sample.md:3: make nosuchtarget: no such Makefile target",
    "sample.md:3: make nohog: no such Makefile target",
    "sample.md:4: forkhorse nosuchcommand: no such command",
    "sample.md:4: forkhorse keys nosuchsub: no such subcommand",
    "sample.md:5: tests/unit/nosuch.py: no such path",
    "sample.md:5: service/nosuch.py: no such path",
    "sample.md:9: docs/nosuch.md: the link's target does not exist",
    "sample.md:9: README.md#no-such-heading: no such heading in the linked document",
    "sample.md:12: forkhorse nosuchowner: no such command",
    "sample.md:13: make nosuchfenced: no such Makefile target",
]


@pytest.mark.parametrize("problem", SAMPLE_PROBLEMS)
def test_a_bogus_name_is_reported_with_its_document_and_line(problem: str) -> None:
    found = problems_of(ROOT / "sample.md", SAMPLE_DOCUMENT)
    assert problem in map(str, found)


def test_what_is_real_or_a_sample_is_not_reported() -> None:
    found = problems_of(ROOT / "sample.md", SAMPLE_DOCUMENT)
    assert sorted(map(str, found)) == sorted(SAMPLE_PROBLEMS)
