"""Trivial-diff triage: may this diff skip a full implementation review? (pure decisions)

Each changed path falls in one bucket; only diffs made entirely of lockfiles, docs, generated
or vendored files, and version-only release chores may skip. Code, flow artifacts and anything
unrecognised force a review; a mix the rules do not name is ambiguous, and ambiguous means
review (no model is asked). A false skip is worse than a false review.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Final

LOCKFILES: Final = frozenset(
    [
        "package-lock.json",
        "bun.lock",
        "bun.lockb",
        "pnpm-lock.yaml",
        "yarn.lock",
        "Gemfile.lock",
        "poetry.lock",
        "Cargo.lock",
        "uv.lock",
        "composer.lock",
        "mix.lock",
        "go.sum",
    ]
)
RELEASE_CHORES: Final = frozenset(
    ["plugin.json", "package.json", "Cargo.toml", "pyproject.toml", "CHANGELOG.md"]
)
GENERATED_PREFIXES: Final = (
    "plugins/flow-next/codex/",
    "node_modules/",
    "vendor/",
    "third_party/",
    "dist/",
    "build/",
    ".next/",
)
ARTIFACT_PREFIXES: Final = (".flow/specs/", ".flow/tasks/", ".flow/epics/")
CODE_EXTENSIONS: Final = frozenset(
    [
        ".py",
        ".pyi",
        ".js",
        ".jsx",
        ".mjs",
        ".cjs",
        ".ts",
        ".tsx",
        ".go",
        ".rs",
        ".rb",
        ".java",
        ".kt",
        ".scala",
        ".swift",
        ".cs",
        ".c",
        ".cc",
        ".cpp",
        ".cxx",
        ".h",
        ".hh",
        ".hpp",
        ".hxx",
        ".sh",
        ".bash",
        ".zsh",
        ".fish",
        ".lua",
        ".pl",
        ".php",
        ".ex",
        ".exs",
        ".erl",
        ".elm",
        ".clj",
        ".sql",
    ]
)
DOC_EXTENSIONS: Final = frozenset([".md", ".mdx", ".txt", ".rst", ".adoc"])
SKIP: Final = "SKIP"
REVIEW: Final = "REVIEW"

_JSON_VERSION = re.compile(r'\s*"version"\s*:\s*"[^"]*"\s*,?\s*')
_TOML_VERSION = re.compile(r'\s*version\s*=\s*"[^"]*"\s*')
_DIFF_HEADERS: Final = ("+++", "---", "diff ", "index ", "@@", "Binary ")

# A chore's diff (`git diff --unified=0 base..HEAD -- path`), or None when git had no context.
ChoreDiff = Callable[[str], str | None]


def bucket(path: str) -> str:
    """One of code, lockfile, docs, chore, generated, artifact, other."""
    normalized = path.replace("\\", "/").strip()
    if not normalized:
        return "other"
    if normalized.startswith(GENERATED_PREFIXES):
        return "generated"
    name = normalized.rsplit("/", 1)[-1]
    if name in LOCKFILES:
        return "lockfile"
    if normalized.startswith(ARTIFACT_PREFIXES):
        return "artifact"
    if name in RELEASE_CHORES:
        return "chore"
    dot = name.rfind(".")
    extension = name[dot:].lower() if dot > 0 else ""
    if extension in CODE_EXTENSIONS:
        return "code"
    return "docs" if extension in DOC_EXTENSIONS else "other"


def version_only(path: str, diff: str) -> bool:
    """A chore's change touches only version fields (CHANGELOG: only additions)."""
    name = path.rsplit("/", 1)[-1]
    changed = False
    for line in diff.splitlines():
        if line.startswith(_DIFF_HEADERS) or not line.startswith(("+", "-")):
            continue
        content = line[1:]
        if not content.strip():
            continue
        changed = True
        if name == "CHANGELOG.md":
            if line.startswith("-"):
                return False
        elif not (
            (name.endswith(".json") and _JSON_VERSION.fullmatch(content))
            or (name.endswith(".toml") and _TOML_VERSION.fullmatch(content))
        ):
            return False
    return changed


def decide(paths: Sequence[str], chore_diff: ChoreDiff | None = None) -> tuple[str | None, str]:
    """`(SKIP|REVIEW|None, reason)`; None is ambiguous (reviewed, as no judge is consulted)."""
    if not paths:
        return REVIEW, "no changed files (empty diff — refusing to skip)"
    buckets: dict[str, list[str]] = {}
    for path in paths:
        buckets.setdefault(bucket(path), []).append(path)
    for kind, label in (
        ("code", "code change detected"),
        ("artifact", "flow artifact change detected"),
        ("other", "unclassified path"),
    ):
        if kind in buckets:
            return REVIEW, f"{label}: {buckets[kind][0]}"
    if "chore" in buckets:
        if chore_diff is None:
            return None, "manifest change (needs content verification — no git context)"
        for path in buckets["chore"]:
            diff = chore_diff(path)
            if diff is None or not version_only(path, diff):
                return None, f"manifest edit beyond version field: {path}"
    return _skip_shape(paths, buckets)


def _skip_shape(paths: Sequence[str], buckets: dict[str, list[str]]) -> tuple[str | None, str]:
    kinds = set(buckets)
    count = len(paths)
    for only, label, unit in (
        ("lockfile", "lockfile-only", "lock files"),
        ("docs", "docs-only", "files"),
        ("generated", "generated-only", "files"),
    ):
        if kinds == {only}:
            return SKIP, f"{label} ({paths[0] if count == 1 else f'{count} {unit}'})"
    chores, docs, locks = (len(buckets.get(kind, [])) for kind in ("chore", "docs", "lockfile"))
    if kinds <= {"chore"}:
        return SKIP, f"release-chore ({count} manifest files)"
    if kinds <= {"chore", "docs"}:
        return SKIP, f"release-chore ({chores} manifest + {docs} doc file(s))"
    if kinds <= {"lockfile", "chore"}:
        return SKIP, f"dep-update ({locks} lock + {chores} manifest file(s))"
    if kinds <= {"lockfile", "generated"}:
        return SKIP, f"lockfile+generated ({count} files)"
    return None, f"mixed non-code categories: {sorted(kinds)}"


def skip_receipt(
    *, task: str, base: str, reason: str, changed: int, timestamp: str
) -> dict[str, object]:
    """The `impl_review` receipt a skip leaves: mode `triage_skip`, verdict SHIP."""
    return {
        "type": "impl_review",
        "id": task,
        "mode": "triage_skip",
        "base": base,
        "verdict": "SHIP",
        "reason": reason,
        "source": "deterministic",
        "changed_file_count": changed,
        "timestamp": timestamp,
    }
