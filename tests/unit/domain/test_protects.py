"""A check's `protects`: the checks file's new key, its bounds, the runners' defaults, glob
matching, and the bounded comparison of protected paths between canonical and a commit."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

import pytest
from forkhorse.domain.checks import (
    MAKE_PROTECTS,
    NODE_PROTECTS,
    PYTHON_PROTECTS,
    FullCheckDef,
    GlobSet,
    InvalidChecksConfig,
    default_protects,
    glob_problem,
    parse_checks,
    protected_globs,
)
from forkhorse.domain.checks_change import (
    UNCOMPARED,
    DeclaredCheck,
    PathChange,
    ProtectedPathsUncompared,
    changed_protected_paths,
    declared_checks,
    diff_checks,
    unaccepted_reasons,
    with_protected_changes,
)
from forkhorse.domain.gate import Definitions
from forkhorse.domain.limits import PROTECTS

NPM = '{"name":"unit","tier":"full","image":"default","run":"npm test"}'


def _full(run: str, protects: list[str] | None = None) -> FullCheckDef:
    item: dict[str, object] = {"name": "c", "tier": "full", "image": "default", "run": run}
    if protects is not None:
        item["protects"] = protects
    [check] = parse_checks(json.dumps([item]))
    assert isinstance(check, FullCheckDef)
    return check


# --- the checks file -----------------------------------------------------------------------


def test_a_checks_file_without_protects_records_the_same_definition_as_before() -> None:
    """Receipts record `definition()`: its keys, and so every digest, are unchanged."""
    [quick, full] = parse_checks(
        '[{"name":"q","tier":"quick","module":".forkhorse/quick/q.py"},' + NPM + "]"
    )
    assert quick.definition() == {"name": "q", "tier": "quick", "module": ".forkhorse/quick/q.py"}
    assert full.definition() == {
        "name": "unit",
        "tier": "full",
        "image": "default",
        "run": "npm test",
        "timeoutSeconds": 600,
    }


def test_a_fingerprint_without_protected_paths_is_the_one_from_before() -> None:
    """A consent stored before `protects` existed still matches at promote."""
    definitions = Definitions(checks=parse_checks("[" + NPM + "]"))
    declared = declared_checks(definitions, {})["unit"]
    before = json.dumps(
        {"definition": declared.definition, "moduleDigest": None},
        sort_keys=True,
        separators=(",", ":"),
    )
    assert declared.fingerprint == "sha256:" + hashlib.sha256(before.encode()).hexdigest()


def test_protects_is_accepted_on_both_tiers_and_recorded_when_declared() -> None:
    [quick, full] = parse_checks(
        '[{"name":"q","tier":"quick","module":".forkhorse/quick/q.py","protects":["ci/*.env"]},'
        '{"name":"f","tier":"full","image":"default","run":"true","protects":[]}]'
    )
    assert quick.definition()["protects"] == ["ci/*.env"]
    assert full.definition()["protects"] == []
    assert protected_globs(quick) == ("ci/*.env",)
    assert protected_globs(full) == ()


@pytest.mark.parametrize(
    ("protects", "message"),
    [
        ("ci/*.env", '"protects" as a JSON array'),
        ([7], "a glob is a non-empty string"),
        ([""], "a glob is a non-empty string"),
        (["a" * (PROTECTS.glob_chars + 1)], f"at most {PROTECTS.glob_chars} characters"),
        (["/etc/passwd"], "no empty segment"),
        (["ci/"], "no empty segment"),
        (["a//b"], "no empty segment"),
        (["../x"], "no . or .. segment"),
        (["./x"], "no . or .. segment"),
        ([".git/config"], "no .git segment"),
        (["a/.GIT/b"], "no .git segment"),
        (["a**/b"], "** is a whole segment"),
        (["a\\b"], "backslashes"),
        (["[ab]"], "brackets"),
        (["{a,b}"], "braces"),
        (["a\nb"], "control characters"),
        (["/".join(["a"] * 65)], "at most 64 levels"),
        (["a", "a"], "twice"),
        ([f"p{i}" for i in range(PROTECTS.globs + 1)], f"at most {PROTECTS.globs} are allowed"),
    ],
)
def test_unsafe_or_unbounded_protects_make_the_file_invalid(protects: object, message: str) -> None:
    item = {"name": "c", "tier": "full", "image": "default", "run": "true", "protects": protects}
    with pytest.raises(InvalidChecksConfig) as refused:
        parse_checks(json.dumps([item]))
    assert message in refused.value.message


def test_the_bounds_admit_their_maximum() -> None:
    globs = [f"p{i}/" + "x" * (PROTECTS.glob_chars - 4) for i in range(PROTECTS.globs)]
    assert len(_full("true", globs).protects or ()) == PROTECTS.globs
    assert glob_problem("**") is None


# --- defaults ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("run", "expected"),
    [
        ("npm test", NODE_PROTECTS),
        ("npx vitest run", NODE_PROTECTS),
        ("yarn test", NODE_PROTECTS),
        ("pnpm -r test", NODE_PROTECTS),
        ('node -e "process.exit(0)"', NODE_PROTECTS),
        ("pytest -q", PYTHON_PROTECTS),
        ("python -m pytest", PYTHON_PROTECTS),
        ("python3.13 -m unittest", PYTHON_PROTECTS),
        ("tox -e py", PYTHON_PROTECTS),
        ("make test", MAKE_PROTECTS),
        ("true", ()),
        ("echo hi", ()),
    ],
)
def test_the_runner_named_by_the_command_picks_the_defaults(
    run: str, expected: tuple[str, ...]
) -> None:
    assert default_protects(_full(run)) == expected


def test_a_runner_anywhere_in_the_command_counts() -> None:
    """After `cd app &&`, behind `FOO=1`, inside `sh -c "..."`, or as a path's last segment."""
    for run in ("cd app && npm test", "FOO=1 npm test", 'sh -c "npm test"', "/usr/bin/npm test"):
        assert default_protects(_full(run))[: len(NODE_PROTECTS)] == NODE_PROTECTS, run
    both = default_protects(_full("make build; python3 -m pytest"))
    assert both == MAKE_PROTECTS + PYTHON_PROTECTS


def test_the_files_a_command_names_are_protected_as_literal_paths() -> None:
    assert default_protects(_full("sh ci/test.sh")) == ("ci/test.sh",)
    assert default_protects(_full("./run.sh && sh bin/npm x")) == (
        *NODE_PROTECTS,
        "run.sh",
        "bin/npm",
    )
    # A directory, a flag, an absolute or escaping path is not a protected file path.
    assert default_protects(_full("sh -x /opt/run.sh ../up.sh tests")) == ()
    many = " ".join(f"sh s{i}.sh;" for i in range(PROTECTS.command_paths + 5))
    assert len(default_protects(_full(many))) == PROTECTS.command_paths


def test_a_quick_check_protects_only_what_it_declares() -> None:
    [quick] = parse_checks('[{"name":"q","tier":"quick","module":".forkhorse/quick/npm.py"}]')
    assert default_protects(quick) == ()


def test_declared_globs_widen_the_defaults() -> None:
    check = _full("npm test", ["jest.config.js", "**/.npmrc"])
    assert protected_globs(check) == (*NODE_PROTECTS, "jest.config.js")


# --- glob matching -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("glob", "path", "matched"),
    [
        ("**/conftest.py", "conftest.py", True),
        ("**/conftest.py", "tests/unit/conftest.py", True),
        ("**/conftest.py", "tests/unit/conftest.pyc", False),
        (".npmrc", ".npmrc", True),
        (".npmrc", "app/.npmrc", False),
        ("**/.npmrc", "app/.npmrc", True),
        ("*.mk", "rules.mk", True),
        ("*.mk", "mk/rules.mk", False),
        ("**/*.mk", "mk/rules.mk", True),
        ("ci/*.env", "ci/test.env", True),
        ("ci/*.env", "ci/sub/test.env", False),
        ("ci/?.env", "ci/a.env", True),
        ("ci/?.env", "ci/ab.env", False),
        ("*", ".hidden", True),
        ("a/**/b", "a/b", True),
        ("a/**/b", "a/x/y/b", True),
        ("a/**", "a/x/y", True),
        # A glob that names a directory protects everything under it.
        ("**/node_modules", "web/node_modules/.bin/jest", True),
        ("pytest", "pytest/__init__.py", True),
        ("pytest", "src/pytest/x.py", False),
        ("*a*a*a*b", "a" * 200, False),
    ],
)
def test_glob_matching(glob: str, path: str, matched: bool) -> None:
    assert glob_problem(glob) is None
    assert GlobSet([glob]).matches(path.split("/")) is matched


def test_a_directory_is_entered_only_when_it_may_hold_a_protected_path() -> None:
    anchored = GlobSet(["ci/*.env", "Makefile"])
    assert anchored.may_hold(["ci"])
    assert not anchored.may_hold(["src"])
    assert not anchored.may_hold(["ci", "sub"])
    assert GlobSet(["**/conftest.py"]).may_hold(["any", "where"])
    assert not GlobSet([]).may_hold(["ci"])


# --- the comparison ------------------------------------------------------------------------

DIR, FILE, EXEC = 0o040000, 0o100644, 0o100755


@dataclass(frozen=True)
class Item:
    name: bytes
    mode: int
    sha: str


class Trees:
    """An in-memory object store of trees, counting what is read."""

    def __init__(self) -> None:
        self.trees: dict[str, tuple[Item, ...]] = {}
        self.reads: list[str] = []

    def tree(self, entries: dict[str, tuple[int, str]]) -> str:
        items = tuple(Item(n.encode(), mode, sha) for n, (mode, sha) in sorted(entries.items()))
        sha = hashlib.sha1(repr(items).encode()).hexdigest()
        self.trees[sha] = items
        return sha

    def read(self, sha: str) -> tuple[Item, ...]:
        self.reads.append(sha)
        return self.trees[sha]


def _sha(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()


def _repo(trees: Trees, files: dict[str, tuple[int, str]]) -> str:
    """A tree holding `files` (path -> (mode, blob)), subtrees built bottom-up."""
    nested: dict[str, dict[str, tuple[int, str]]] = {}
    top: dict[str, tuple[int, str]] = {}
    for path, entry in files.items():
        head, _, rest = path.partition("/")
        if rest:
            nested.setdefault(head, {})[rest] = entry
        else:
            top[path] = entry
    for name, inner in nested.items():
        top[name] = (DIR, _repo(trees, inner))
    return trees.tree(top)


BASE_FILES = {
    "package.json": (FILE, _sha("pkg")),
    "src/a.js": (FILE, _sha("a")),
    "vendor/lib/x.js": (FILE, _sha("x")),
    "tests/conftest.py": (FILE, _sha("conf")),
}


def test_only_changed_protected_paths_are_reported_with_each_sides_entry() -> None:
    trees = Trees()
    base = _repo(trees, BASE_FILES)
    head = _repo(
        trees,
        {
            **BASE_FILES,
            ".npmrc": (FILE, _sha("script-shell=/bin/true")),
            "package.json": (EXEC, _sha("pkg")),  # the mode alone changed
            "src/a.js": (FILE, _sha("a2")),  # code under review: not protected
        },
    )
    globs = GlobSet([*NODE_PROTECTS, *PYTHON_PROTECTS])
    changed = changed_protected_paths(trees.read, base, head, globs)
    assert changed == {
        ".npmrc": (None, f"100644 {_sha('script-shell=/bin/true')}"),
        "package.json": (f"100644 {_sha('pkg')}", f"100755 {_sha('pkg')}"),
    }
    # Identical subtrees (tests/, vendor/) are never read; src/ differs, so it is.
    assert len(trees.reads) == 4


def test_a_removed_or_replaced_protected_file_is_reported() -> None:
    trees = Trees()
    base = _repo(trees, BASE_FILES)
    files = dict(BASE_FILES)
    del files["tests/conftest.py"]
    files["tests/conftest.py/x"] = (FILE, _sha("now a directory"))
    head = _repo(trees, files)
    changed = changed_protected_paths(trees.read, base, head, GlobSet(PYTHON_PROTECTS))
    # What is under a protected name is protected too (the glob names a directory now).
    assert changed == {
        "tests/conftest.py": (f"100644 {_sha('conf')}", None),
        "tests/conftest.py/x": (None, f"100644 {_sha('now a directory')}"),
    }


def test_a_walk_past_its_budget_is_uncompared() -> None:
    trees = Trees()
    many = {f"d/f{i}": (FILE, _sha(str(i))) for i in range(60)}
    base = _repo(trees, many)
    head = _repo(trees, {path: (FILE, _sha(path)) for path in many})
    globs = GlobSet(["**/conftest.py"])
    assert changed_protected_paths(trees.read, base, head, globs, max_entries=200) == {}
    with pytest.raises(ProtectedPathsUncompared):
        changed_protected_paths(trees.read, base, head, globs, max_entries=100)


def test_a_walk_deeper_than_the_path_levels_is_uncompared() -> None:
    trees = Trees()
    deep = "/".join(["d"] * 70) + "/f"
    base = _repo(trees, {deep: (FILE, _sha("1"))})
    head = _repo(trees, {deep: (FILE, _sha("2"))})
    with pytest.raises(ProtectedPathsUncompared):
        changed_protected_paths(trees.read, base, head, GlobSet(["**/x"]))


def _declared(*checks: str) -> dict[str, DeclaredCheck]:
    return declared_checks(Definitions(checks=parse_checks("[" + ",".join(checks) + "]")), {})


def test_a_protected_path_changes_the_check_and_is_named_in_a_reason() -> None:
    base, head = _declared(NPM), _declared(NPM)

    def compare(_: GlobSet) -> dict[str, PathChange]:
        return {".npmrc": (None, "100644 b"), "package.json": ("100644 a", "100644 c")}

    base, head = with_protected_changes(base, head, compare, ("t1", "t2"))
    diff = diff_checks(base, head)
    assert [(c.check, c.change) for c in diff.changes] == [("unit", "changed")]
    assert diff.reasons() == [
        "checks-changed: .npmrc (protected by check 'unit') was added.",
        "checks-changed: package.json (protected by check 'unit') changed.",
    ]
    # The owner's acceptance of exactly this change covers it; another one does not.
    assert unaccepted_reasons(diff, diff.protected) == []
    other = diff_checks(
        *with_protected_changes(
            _declared(NPM),
            _declared(NPM),
            lambda _: {".npmrc": (None, "100644 other")},
            ("t1", "t3"),
        )
    )
    assert unaccepted_reasons(other, diff.protected)[0].startswith(
        "checks-changed: The accepted checks change differs"
    )


def test_the_globs_are_canonicals_and_a_changed_declaration_is_named_too() -> None:
    narrowed = NPM.replace('"npm test"', '"sh run.sh"')
    seen: list[tuple[str, ...]] = []

    def compare(globs: GlobSet) -> dict[str, PathChange]:
        seen.append(globs.globs)
        return {".npmrc": (None, "100644 b")}

    diff = diff_checks(
        *with_protected_changes(_declared(NPM), _declared(narrowed), compare, ("a", "b"))
    )
    assert seen == [NODE_PROTECTS]
    assert diff.reasons() == [
        "checks-changed: Check unit's declaration changed.",
        "checks-changed: .npmrc (protected by check 'unit') was added.",
    ]


def test_many_paths_are_named_up_to_a_bound_then_counted() -> None:
    count = PROTECTS.reasons_per_check + 3
    changes: dict[str, PathChange] = {
        f"p{i:02}/package.json": (None, "100644 x") for i in range(count)
    }
    diff = diff_checks(
        *with_protected_changes(_declared(NPM), _declared(NPM), lambda _: changes, ("a", "b"))
    )
    reasons = diff.reasons()
    assert len(reasons) == PROTECTS.reasons_per_check + 1
    assert reasons[-1] == "checks-changed: 3 more paths protected by check 'unit' changed."


def test_an_uncompared_walk_fails_closed_as_a_change_to_accept() -> None:
    def compare(_: GlobSet) -> dict[str, PathChange]:
        raise ProtectedPathsUncompared()

    base, head = with_protected_changes(_declared(NPM), _declared(NPM), compare, ("t1", "t2"))
    assert (base["unit"].protected, head["unit"].protected) == (
        {UNCOMPARED: "t1"},
        {UNCOMPARED: "t2"},
    )
    diff = diff_checks(base, head)
    [reason] = diff.reasons()
    assert reason.startswith(
        "checks-changed: The paths protected by check 'unit' could not be compared"
    )


def test_nothing_is_walked_when_no_shared_check_protects_anything() -> None:
    quick = '{"name":"q","tier":"quick","module":".forkhorse/quick/q.py"}'

    def compare(_: GlobSet) -> dict[str, PathChange]:
        raise AssertionError("walked")

    base, head = with_protected_changes(_declared(quick), _declared(quick), compare, ("a", "b"))
    assert diff_checks(base, head).changes == ()
    # A removed check is a reason already; an added one protects nothing yet.
    base, head = with_protected_changes(_declared(NPM), _declared(quick), compare, ("a", "b"))
    assert [c.change for c in diff_checks(base, head).changes] == ["removed", "added"]
