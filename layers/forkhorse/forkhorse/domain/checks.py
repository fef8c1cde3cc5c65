"""Check definitions: the strict parser of a commit's `.forkhorse/checks` file.

Pure: text in, definitions out. Anything the parser does not accept is invalid configuration,
which the runner records as an `infrastructure-error` with `InvalidChecksConfig`'s message.

A check may also name, in `protects`, the paths whose contents count as part of the check
(the protected-checks policy compares them against canonical); `protected_globs` adds the
defaults for the runners its command names (see `default_protects`).
"""

import hashlib
import json
import re
from collections.abc import Sequence
from typing import Literal, TypeGuard

from pydantic import BaseModel, Field

from forkhorse.domain.limits import PROTECTS, SNAPSHOT
from forkhorse.domain.snapshot import is_safe_entry_name
from forkhorse.domain.wire import WIRE_CONFIG, is_none

CHECKS_PATH = ".forkhorse/checks"
QUICK_MODULE_DIR = ".forkhorse/quick/"
MAX_CHECKS = 64
MAX_CHECKS_FILE_BYTES = 64 * 1024
MAX_NAME_LENGTH = 64
MAX_IMAGE_LENGTH = 128
MAX_RUN_LENGTH = 4096
MIN_TIMEOUT_SECONDS = 1
MAX_TIMEOUT_SECONDS = 3600
DEFAULT_FULL_TIMEOUT_SECONDS = 600

QUICK_REQUIRED_FIELDS = frozenset({"name", "tier", "module"})
QUICK_FIELDS = QUICK_REQUIRED_FIELDS | {"protects"}
FULL_REQUIRED_FIELDS = frozenset({"name", "tier", "image", "run"})
FULL_FIELDS = FULL_REQUIRED_FIELDS | {"timeoutSeconds", "protects"}

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
# A quick module's extension picks its runtime; this is the one place that choice is made.
type QuickLanguage = Literal["python", "javascript"]
QUICK_LANGUAGES: dict[str, QuickLanguage] = {".py": "python", ".js": "javascript"}
_IMAGE = re.compile(r"[a-z0-9][a-z0-9._-]*")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class InvalidChecksConfig(ValueError):
    """`.forkhorse/checks` is invalid or unsafe; `message` says precisely what is wrong."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class QuickCheckDef(BaseModel):
    """A quick check: one Python (stdlib-only) or JavaScript (import-free ES) module run in
    the quick sandbox."""

    model_config = WIRE_CONFIG

    name: str
    tier: Literal["quick"] = "quick"
    module: str
    # Absent unless declared, so the recorded definition of a check without it is unchanged.
    protects: tuple[str, ...] | None = Field(default=None, exclude_if=is_none)

    def definition(self) -> dict[str, object]:
        """The normalized wire form recorded in a receipt's check record."""
        return self.model_dump(mode="json")

    @property
    def language(self) -> QuickLanguage:
        """The runtime the module needs, from its extension (the parser admits only these)."""
        return QUICK_LANGUAGES[self.module[self.module.rindex(".") :]]


class FullCheckDef(BaseModel):
    """A full check: a shell command run in a container image named by deployment config."""

    model_config = WIRE_CONFIG

    name: str
    tier: Literal["full"] = "full"
    image: str
    run: str
    timeout_seconds: int = DEFAULT_FULL_TIMEOUT_SECONDS
    protects: tuple[str, ...] | None = Field(default=None, exclude_if=is_none)

    def definition(self) -> dict[str, object]:
        """The normalized wire form, with the effective timeout spelled out."""
        return self.model_dump(mode="json")


type CheckDef = QuickCheckDef | FullCheckDef


def in_run_order(checks: Sequence[CheckDef]) -> list[CheckDef]:
    """Quick checks first, each tier in file order: the order a run records them in."""
    return [c for c in checks if c.tier == "quick"] + [c for c in checks if c.tier == "full"]


def parse_checks(text: str) -> list[CheckDef]:
    """Parse `.forkhorse/checks`, raising `InvalidChecksConfig` on anything not strictly valid."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_CHECKS_FILE_BYTES:
        raise InvalidChecksConfig(f"{CHECKS_PATH} is larger than {MAX_CHECKS_FILE_BYTES} bytes.")
    document = _load_strict_json(text)
    if not isinstance(document, list):
        raise InvalidChecksConfig(f"{CHECKS_PATH} must be a JSON array of checks.")
    if not document:
        raise InvalidChecksConfig(f"{CHECKS_PATH} must list at least one check.")
    if len(document) > MAX_CHECKS:
        raise InvalidChecksConfig(
            f"{CHECKS_PATH} lists {len(document)} checks; at most {MAX_CHECKS} are allowed."
        )
    checks = [_parse_check(index, item) for index, item in enumerate(document, start=1)]
    _reject_duplicate_names(checks)
    return checks


def _load_strict_json(text: str) -> object:
    try:
        return json.loads(
            text, object_pairs_hook=_unique_keys_object, parse_constant=_reject_constant
        )
    except InvalidChecksConfig:
        raise
    except (ValueError, RecursionError) as error:
        raise InvalidChecksConfig(f"{CHECKS_PATH} is not valid JSON.") from error


def _unique_keys_object(pairs: list[tuple[str, object]]) -> dict[str, object]:
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            raise InvalidChecksConfig(f"{CHECKS_PATH} repeats the JSON key {_shown(key)}.")
        seen.add(key)
    return dict(pairs)


def _reject_constant(constant: str) -> object:
    raise InvalidChecksConfig(f"{CHECKS_PATH} is not strict JSON: {constant} is not allowed.")


def _parse_check(index: int, item: object) -> CheckDef:
    where = f"{CHECKS_PATH}: check {index}"
    if not isinstance(item, dict):
        raise InvalidChecksConfig(f"{where} must be a JSON object.")
    name = _require_name(where, item)
    where = f"{where} ({json.dumps(name)})"
    tier = item.get("tier")
    if tier == "quick":
        return _parse_quick(where, name, item)
    if tier == "full":
        return _parse_full(where, name, item)
    if "tier" not in item:
        raise InvalidChecksConfig(f'{where} is missing the "tier" field.')
    raise InvalidChecksConfig(f'{where} has tier {_shown(tier)}; it must be "quick" or "full".')


def _require_name(where: str, item: dict[str, object]) -> str:
    if "name" not in item:
        raise InvalidChecksConfig(f'{where} is missing the "name" field.')
    name = item["name"]
    if not isinstance(name, str) or not name:
        raise InvalidChecksConfig(f'{where} must have a non-empty string "name".')
    if len(name) > MAX_NAME_LENGTH or not _NAME.fullmatch(name):
        raise InvalidChecksConfig(
            f"{where} has the name {_shown(name)}; a name is 1 to {MAX_NAME_LENGTH} letters, "
            "digits, dots, underscores or hyphens and starts with a letter or digit."
        )
    return name


def _parse_quick(where: str, name: str, item: dict[str, object]) -> QuickCheckDef:
    _require_exact_fields(
        where, item, required=QUICK_REQUIRED_FIELDS, allowed=QUICK_FIELDS, tier="quick"
    )
    module = item["module"]
    if not _is_quick_module(module):
        raise InvalidChecksConfig(
            f"{where} has the module {_shown(module)}; a quick module must be one .js or .py "
            f"file directly under {QUICK_MODULE_DIR} (a safe file name: no backslash, "
            "control character or line separator, and not .git)."
        )
    protects = _parse_protects(where, item)
    return QuickCheckDef(name=name, module=module, protects=protects)


def _is_quick_module(module: object) -> TypeGuard[str]:
    """The spec's rule: one `.js` (or our `.py`) file immediately under `.forkhorse/quick/`.

    The file name is any name the snapshot's path rules accept (no `/`, backslash, control
    character, `.`/`..` or `.git`), so `brand.v2.js` and `check.node.js` are modules. The
    extension is case-sensitive and picks the runtime; the stem must hold more than dots.
    A line separator (U+2028, U+2029) is refused too: the sandbox's hello is line-based.
    """
    if not isinstance(module, str) or not module.startswith(QUICK_MODULE_DIR):
        return False
    file_name = module.removeprefix(QUICK_MODULE_DIR)
    extension = file_name[file_name.rfind(".") :] if "." in file_name else ""
    stem = file_name.removesuffix(extension)
    return (
        extension in QUICK_LANGUAGES
        and stem.strip(".") != ""
        and is_safe_entry_name(file_name)
        and len(file_name.splitlines()) == 1
    )


def _parse_full(where: str, name: str, item: dict[str, object]) -> FullCheckDef:
    _require_exact_fields(
        where, item, required=FULL_REQUIRED_FIELDS, allowed=FULL_FIELDS, tier="full"
    )
    image = item["image"]
    if not isinstance(image, str) or len(image) > MAX_IMAGE_LENGTH or not _IMAGE.fullmatch(image):
        raise InvalidChecksConfig(
            f"{where} has the image {_shown(image)}; an image is a configured image name "
            f"of 1 to {MAX_IMAGE_LENGTH} lowercase letters, digits, dots, underscores or hyphens."
        )
    run = item["run"]
    if not isinstance(run, str) or not run.strip():
        raise InvalidChecksConfig(f'{where} must have a non-empty string "run".')
    if len(run) > MAX_RUN_LENGTH or _CONTROL.search(run.replace("\n", "").replace("\t", "")):
        raise InvalidChecksConfig(
            f'{where} has a "run" command longer than {MAX_RUN_LENGTH} characters '
            "or with control characters."
        )
    timeout = item.get("timeoutSeconds", DEFAULT_FULL_TIMEOUT_SECONDS)
    if type(timeout) is not int or not MIN_TIMEOUT_SECONDS <= timeout <= MAX_TIMEOUT_SECONDS:
        raise InvalidChecksConfig(
            f'{where} has "timeoutSeconds" {_shown(timeout)}; it must be a whole number '
            f"from {MIN_TIMEOUT_SECONDS} to {MAX_TIMEOUT_SECONDS}."
        )
    protects = _parse_protects(where, item)
    return FullCheckDef(name=name, image=image, run=run, timeout_seconds=timeout, protects=protects)


def _require_exact_fields(
    where: str,
    item: dict[str, object],
    *,
    required: frozenset[str],
    allowed: frozenset[str],
    tier: str,
) -> None:
    unknown = sorted(set(item) - allowed)
    if unknown:
        fields = ", ".join(json.dumps(field) for field in unknown)
        raise InvalidChecksConfig(f"{where} has fields not allowed on a {tier} check: {fields}.")
    missing = sorted(required - set(item))
    if missing:
        fields = ", ".join(json.dumps(field) for field in missing)
        raise InvalidChecksConfig(f"{where} is missing required {tier} check fields: {fields}.")


def _reject_duplicate_names(checks: list[CheckDef]) -> None:
    seen: set[str] = set()
    for check in checks:
        if check.name in seen:
            raise InvalidChecksConfig(f"{CHECKS_PATH} names the check {_shown(check.name)} twice.")
        seen.add(check.name)


def _shown(value: object) -> str:
    """A short, escaped rendering of a rejected value for an error message."""
    rendered = json.dumps(value, ensure_ascii=True)
    return rendered if len(rendered) <= 80 else rendered[:77] + "..."


def quick_module_digest(source: str) -> str:
    """A quick check's image digest: `module:sha256:<hex>` of the module source's UTF-8 bytes."""
    return "module:sha256:" + hashlib.sha256(source.encode("utf-8")).hexdigest()


# --- protects: the paths whose contents count as part of a check ----------------------------
#
# A glob is a repository-relative path of `/`-separated segments. In a segment `*` matches
# any run of characters and `?` one character (never a `/`, dot files included); a whole
# segment `**` matches any number of segments, none included. A glob that matches a
# directory protects everything under it. There are no character classes, braces or
# negation. Matching simulates the glob segment by segment (an NFA), so its cost is bounded
# by the glob's and the path's lengths, whatever either holds.

_GLOB_FORBIDDEN = re.compile(r"[\x00-\x1f\x7f\\\[\]{}]")
_GLOBSTAR = "**"


def _parse_protects(where: str, item: dict[str, object]) -> tuple[str, ...] | None:
    if "protects" not in item:
        return None
    globs = item["protects"]
    if not isinstance(globs, list):
        raise InvalidChecksConfig(f'{where} must have "protects" as a JSON array of path globs.')
    if len(globs) > PROTECTS.globs:
        raise InvalidChecksConfig(
            f'{where} lists {len(globs)} "protects" globs; at most {PROTECTS.globs} are allowed.'
        )
    seen: set[str] = set()
    for glob in globs:
        problem = glob_problem(glob)
        if problem is not None:
            raise InvalidChecksConfig(f'{where} has the "protects" glob {_shown(glob)}: {problem}')
        assert isinstance(glob, str)
        if glob in seen:
            raise InvalidChecksConfig(f'{where} lists the "protects" glob {_shown(glob)} twice.')
        seen.add(glob)
    return tuple(str(glob) for glob in globs)


def glob_problem(glob: object) -> str | None:
    """Why `glob` is not a safe protects glob, as a sentence; None when it is one."""
    if not isinstance(glob, str) or not glob:
        return "a glob is a non-empty string."
    if len(glob) > PROTECTS.glob_chars:
        return f"a glob is at most {PROTECTS.glob_chars} characters."
    if _GLOB_FORBIDDEN.search(glob):
        return "a glob has no control characters, backslashes, brackets or braces."
    segments = glob.split("/")
    if len(segments) > SNAPSHOT.path_levels:
        return f"a glob is at most {SNAPSHOT.path_levels} levels."
    for segment in segments:
        if not segment:
            return "a glob is a relative path with no empty segment (no leading or trailing /)."
        if segment in (".", ".."):
            return "a glob has no . or .. segment."
        if segment.lower() == ".git":
            return "a glob has no .git segment."
        if _GLOBSTAR in segment and segment != _GLOBSTAR:
            return "** is a whole segment of a glob."
    return None


def _segment_matches(pattern: str, name: str) -> bool:
    """`*` and `?` wildcard match of one segment: greedy, backtracking only to the last
    `*`, so at most len(pattern) * len(name) steps."""
    p = n = 0
    star, resume = -1, 0
    while n < len(name):
        if p < len(pattern) and pattern[p] in ("?", name[n]) and pattern[p] != "*":
            p, n = p + 1, n + 1
        elif p < len(pattern) and pattern[p] == "*":
            star, resume = p, n
            p += 1
        elif star >= 0:
            p, resume = star + 1, resume + 1
            n = resume
        else:
            return False
    while p < len(pattern) and pattern[p] == "*":
        p += 1
    return p == len(pattern)


class GlobSet:
    """Compiled protects globs: which paths they protect, and which directories may hold one."""

    def __init__(self, globs: Sequence[str]) -> None:
        self.globs = tuple(dict.fromkeys(globs))
        self._patterns = [tuple(glob.split("/")) for glob in self.globs]

    def __bool__(self) -> bool:
        return bool(self.globs)

    @staticmethod
    def _closure(pattern: tuple[str, ...], states: set[int]) -> set[int]:
        closed = set(states)
        for state in sorted(states):
            while state < len(pattern) and pattern[state] == _GLOBSTAR:
                state += 1
                closed.add(state)
        return closed

    def _run(self, pattern: tuple[str, ...], parts: Sequence[str]) -> tuple[bool, set[int]]:
        """(whether the glob matched `parts` or a directory above them, the live states)."""
        end = len(pattern)
        states = self._closure(pattern, {0})
        for part in parts:
            if end in states:
                return True, states
            following: set[int] = set()
            for state in states:
                if state == end:
                    continue
                if pattern[state] == _GLOBSTAR:
                    following.add(state)
                elif _segment_matches(pattern[state], part):
                    following.add(state + 1)
            if not following:
                return False, following
            states = self._closure(pattern, following)
        return end in states, states

    def matches(self, parts: Sequence[str]) -> bool:
        return any(self._run(pattern, parts)[0] for pattern in self._patterns)

    def may_hold(self, parts: Sequence[str]) -> bool:
        """Whether a path under the directory `parts` could be protected."""
        for pattern in self._patterns:
            matched, states = self._run(pattern, parts)
            if matched or states:
                return True
        return False


# The files each runner reads from the checkout to decide what runs (at any depth: `cd app &&
# npm test` reads app/.npmrc). Test-framework configuration beyond these is a check's own
# `protects` to declare.
NODE_PROTECTS = (
    "**/package.json",
    "**/.npmrc",
    "**/package-lock.json",
    "**/npm-shrinkwrap.json",
    "**/yarn.lock",
    "**/pnpm-lock.yaml",
    "**/pnpm-workspace.yaml",
    "**/.pnpmfile.cjs",
    "**/.yarnrc",
    "**/.yarnrc.yml",
    "**/.nvmrc",
    "**/node_modules",
)
PYTHON_PROTECTS = (
    "**/pyproject.toml",
    "**/setup.cfg",
    "**/pytest.ini",
    "**/.pytest.ini",
    "**/tox.ini",
    "**/noxfile.py",
    "**/conftest.py",
    # `python -m pytest` imports from the working directory first: a checkout's own
    # `pytest` module would replace the runner.
    "pytest.py",
    "pytest",
    "_pytest",
)
MAKE_PROTECTS = ("**/Makefile", "**/makefile", "**/GNUmakefile", "**/*.mk")

RUNNER_PROTECTS: dict[str, tuple[str, ...]] = {
    "node": NODE_PROTECTS,
    "python": PYTHON_PROTECTS,
    "make": MAKE_PROTECTS,
}
_RUNNER_OF_WORD = {
    **dict.fromkeys(("npm", "npx", "yarn", "pnpm", "node", "corepack"), "node"),
    **dict.fromkeys(("pytest", "py.test", "python", "python3", "tox", "nox"), "python"),
    **dict.fromkeys(("make", "gmake"), "make"),
}
_VERSIONED_PYTHON = re.compile(r"python3\.\d{1,2}")
# A command's words: what stays between blanks, quotes and shell punctuation, so a runner is
# found inside `sh -c "npm test"`, after `cd app &&` or behind `FOO=1`.
_WORD = re.compile(r"[^\s;&|()<>'\"`$\\{}=]+")
_SCRIPT_SUFFIXES = (".sh", ".bash", ".js", ".mjs", ".cjs", ".ts", ".py", ".mk", ".pl", ".rb")
_COMMAND_PATH = re.compile(r"[A-Za-z0-9._+@,-]+(?:/[A-Za-z0-9._+@,-]+)*")


def _runner(word: str) -> str | None:
    name = word.rsplit("/", 1)[-1]
    if _VERSIONED_PYTHON.fullmatch(name):
        return "python"
    return _RUNNER_OF_WORD.get(name)


def _command_path(word: str) -> str | None:
    """A relative file path the command names (`sh ci/test.sh`, `./bin/npm`), if `word` is one."""
    path = word.removeprefix("./")
    if not _COMMAND_PATH.fullmatch(path) or path.startswith("-"):
        return None
    if "/" not in path and not path.endswith(_SCRIPT_SUFFIXES):
        return None
    return path if glob_problem(path) is None else None


def default_protects(check: CheckDef) -> tuple[str, ...]:
    """What a check protects without declaring it. A quick check: nothing (its module is
    compared already). A full check: for every word of its command that names a runner
    (`npm`, `npx`, `yarn`, `pnpm`, `node`, `corepack`; `pytest`, `py.test`, `python`,
    `python3`, `python3.N`, `tox`, `nox`; `make`, `gmake`, by the word's last path
    segment), that runner's configuration files; and each relative file path it names
    (one with a `/` or a script suffix, at most `PROTECTS.command_paths`)."""
    if not isinstance(check, FullCheckDef):
        return ()
    runners: list[str] = []
    paths: list[str] = []
    for word in _WORD.findall(check.run):
        runner = _runner(word)
        if runner is not None and runner not in runners:
            runners.append(runner)
        path = _command_path(word)
        if path is not None and path not in paths and len(paths) < PROTECTS.command_paths:
            paths.append(path)
    defaults = [glob for runner in sorted(runners) for glob in RUNNER_PROTECTS[runner]]
    return tuple(dict.fromkeys([*defaults, *paths]))


def protected_globs(check: CheckDef) -> tuple[str, ...]:
    """Everything a check protects: its defaults, then what it declares."""
    return tuple(dict.fromkeys([*default_protects(check), *(check.protects or ())]))
