"""Quick checks in real bubblewrap, read through a real git snapshot: the module contract."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

import pytest
from forkhorse.adapters.sandbox.bwrap import BwrapSandbox
from forkhorse.domain.checks import QuickCheckDef, parse_checks

from tests.support.sandbox import BRAND, MODULE, Committed, RunModule

pytestmark = pytest.mark.sandbox

REPO_ROOT = Path(__file__).resolve().parents[3]

BRAND_EXAMPLE = """\
import json

def check(ctx):
    text = ctx.read("brand.json")
    return {"ok": text is not None, "message": "Checked brand.json."}
"""


def test_a_passing_module_records_its_source_digest_and_runtime(run_module: RunModule) -> None:
    record = run_module(BRAND_EXAMPLE)
    assert record.outcome == "passed"
    assert record.message == "Checked brand.json."
    assert (
        record.image_digest == "module:sha256:" + hashlib.sha256(BRAND_EXAMPLE.encode()).hexdigest()
    )
    assert (record.runtime, record.platform, record.tier) == (
        "dynamic-worker",
        "local-bwrap",
        "quick",
    )
    assert record.definition == {"name": "probe", "tier": "quick", "module": MODULE}
    assert record.duration_ms is not None
    assert record.duration_ms < 1000


def test_ok_false_fails_with_the_module_message(run_module: RunModule) -> None:
    record = run_module('def check(ctx):\n    return {"ok": False, "message": "Nope."}\n')
    assert (record.outcome, record.message) == ("failed", "Nope.")


def test_a_message_is_optional(run_module: RunModule) -> None:
    record = run_module('def check(ctx):\n    return {"ok": True}\n')
    assert (record.outcome, record.message) == ("passed", "")


def test_async_check_is_accepted(run_module: RunModule) -> None:
    source = (
        "import asyncio\n\nasync def check(ctx):\n    await asyncio.sleep(0)\n"
        '    text = await ctx.read("brand.json")\n'
        '    listing = await ctx.list("")\n'
        '    stat = await ctx.stat("brand.json")\n'
        '    ok = text is not None and stat["size"] == len(text)\n'
        '    return {"ok": ok, "message": str(listing)}\n'
    )
    record = run_module(source)
    assert record.outcome == "passed"
    assert record.message == str(sorted(["brand.json", MODULE]))


def test_async_check_can_fail(run_module: RunModule) -> None:
    record = run_module('async def check(ctx):\n    return {"ok": False, "message": "async no"}\n')
    assert (record.outcome, record.message) == ("failed", "async no")


def test_ctx_read_stat_list_follow_the_spec(run_module: RunModule) -> None:
    source = """\
def check(ctx):
    facts = [
        ctx.read("missing.txt") is None,
        ctx.stat("missing.txt") is None,
        ctx.stat("bin/blob.dat") == {"size": 5, "binary": True},
        ctx.stat("src/a.txt") == {"size": 2, "binary": False},
        ctx.read("src/a.txt") == "a\\n",
        ctx.list("src/") == ["src/a.txt", "src/b/c.txt"],
        ctx.list("nothing/") == [],
        ctx.list("") == sorted(ctx.list("")),
    ]
    return {"ok": all(facts), "message": repr(facts)}
"""
    record = run_module(source, {"src/a.txt": "a\n", "src/b/c.txt": "c", "bin/blob.dat": b"a\0bcd"})
    assert record.outcome == "passed", record.message


def test_malformed_utf8_is_an_error_the_module_may_handle(run_module: RunModule) -> None:
    source = """\
def check(ctx):
    try:
        ctx.read("latin1.txt")
    except Exception as error:
        return {"ok": True, "message": str(error)}
    return {"ok": False, "message": "read returned text"}
"""
    record = run_module(source, {"latin1.txt": b"caf\xe9"})
    assert record.outcome == "passed"
    assert record.message == "The file is not valid UTF-8 text."


def test_module_output_is_kept_as_bounded_logs(run_module: RunModule) -> None:
    source = (
        'import sys\n\ndef check(ctx):\n    print("hello out")\n'
        '    print("hello err", file=sys.stderr)\n    return {"ok": True}\n'
    )
    record = run_module(source)
    assert record.stdout.text == "hello out\n"
    assert record.stderr.text == "hello err\n"


def test_messages_are_sanitized(run_module: RunModule) -> None:
    source = 'def check(ctx):\n    return {"ok": False, "message": "red \\x1b[31m \\u202e evil"}\n'
    record = run_module(source)
    assert record.outcome == "failed"
    assert "\x1b" not in record.message
    assert "\u202e" not in record.message
    assert "\\u001b" in record.message


@pytest.mark.parametrize(
    "source",
    [
        "def check(ctx) return 1\n",  # syntax error
        "raise RuntimeError('at import')\n",
        "CHECK = 1\n",  # no check function
        "check = 42\n",
        "import sys\nsys.exit(0)\n",
    ],
    ids=["syntax-error", "raises-at-import", "no-check", "check-not-callable", "exits-at-import"],
)
def test_import_and_start_failures_are_infrastructure_errors(
    run_module: RunModule, source: str
) -> None:
    record = run_module(source)
    assert record.outcome == "infrastructure-error"
    assert record.message == "The check module could not be imported or defines no check function."
    assert record.image_digest.startswith("module:sha256:")


def test_a_missing_module_has_an_empty_digest_and_cannot_pass(
    sandbox: BwrapSandbox, commit_files: Callable[[dict[str, str | bytes]], Committed]
) -> None:
    committed = commit_files({"brand.json": BRAND})
    record = sandbox.run_check(committed.snapshot, QuickCheckDef(name="gone", module=MODULE))
    assert record.outcome == "infrastructure-error"
    assert record.image_digest == ""
    assert record.message == "The check module is missing from the snapshot."


def test_the_module_source_is_charged_to_the_budget(run_module: RunModule) -> None:
    body = 'def check(ctx):\n    return {"ok": ctx.read("brand.json") is not None}\n'
    source = "#" * (2 * 1024 * 1024 - len(body) - len(BRAND) + 1) + "\n" + body
    assert len(source) <= 2 * 1024 * 1024
    record = run_module(source)
    assert record.outcome == "failed"
    assert record.message == "The check exceeded its snapshot budget of 2097152 bytes."


def test_a_module_larger_than_the_budget_cannot_load(run_module: RunModule) -> None:
    source = "#" * (2 * 1024 * 1024 + 1) + "\ndef check(ctx):\n    return {'ok': True}\n"
    record = run_module(source)
    assert record.outcome == "infrastructure-error"
    assert record.image_digest == ""


def test_the_modules_code_is_named_after_its_path_and_inherits_no_flags(
    run_module: RunModule,
) -> None:
    # The harness runs the module with exec() of its source (compile() would first build the
    # ast module's types); the code must still look as compile(source, path) made it.
    source = """\
import sys

def nested():
    return sys._getframe().f_code.co_filename

module_file = sys._getframe().f_code.co_filename
try:
    annotated: UndefinedName = 1  # evaluated: the harness's __future__ flags are not inherited
    evaluated = False
except NameError:
    evaluated = True

def check(ctx):
    names = {module_file, check.__code__.co_filename, nested()}
    return {"ok": evaluated and names == {__file__}, "message": " ".join(sorted(names))}
"""
    record = run_module(source)
    assert (record.outcome, record.message) == ("passed", MODULE)


def test_the_standard_librarys_extension_modules_load_after_the_privilege_drop(
    run_module: RunModule,
) -> None:
    # Their libraries come through one bind of a stage (library_stage.py), read as the check's
    # uid; the display and terminal ones are not bound.
    source = """\
import importlib

def check(ctx):
    loaded = []
    for name in ("zlib", "_bz2", "_lzma", "_ssl", "_hashlib", "_sqlite3", "_ctypes", "_uuid"):
        importlib.import_module(name)
        loaded.append(name)
    try:
        import _tkinter
    except ImportError:
        loaded.append("no _tkinter")
    return {"ok": True, "message": " ".join(loaded)}
"""
    record = run_module(source)
    assert record.outcome == "passed", record.stderr.text
    assert record.message == "zlib _bz2 _lzma _ssl _hashlib _sqlite3 _ctypes _uuid no _tkinter"


def test_each_check_gets_a_fresh_child(run_module: RunModule) -> None:
    source = 'import os\n\ndef check(ctx):\n    return {"ok": True, "message": str(os.getpid())}\n'
    first, second = run_module(source), run_module(source)
    assert first.outcome == second.outcome == "passed"


def _repository_snapshot(
    commit_files: Callable[[dict[str, str | bytes]], Committed], brand: str
) -> Committed:
    """This repository's checks file and quick modules, and the Python examples, with `brand`."""
    files: dict[str, str | bytes] = {
        path: (REPO_ROOT / path).read_text()
        for path in (
            ".forkhorse/checks",
            ".forkhorse/quick/brand.js",
            ".forkhorse/quick/large-files.js",
            "examples/quick/brand.py",
            "examples/quick/large_files.py",
        )
    }
    return commit_files({**files, "brand.json": brand})


def test_the_repositorys_brand_check_passes_on_its_brand_json(
    sandbox: BwrapSandbox, commit_files: Callable[[dict[str, str | bytes]], Committed]
) -> None:
    committed = _repository_snapshot(commit_files, (REPO_ROOT / "brand.json").read_text())
    definitions = parse_checks((REPO_ROOT / ".forkhorse/checks").read_text())
    brand = next(d for d in definitions if d.name == "brand-quick")
    assert isinstance(brand, QuickCheckDef)
    assert brand.module == ".forkhorse/quick/brand.js"
    record = sandbox.run_check(committed.snapshot, brand)
    assert (record.outcome, record.message) == ("passed", "Checked brand.json.")


@pytest.mark.parametrize("module", [".forkhorse/quick/brand.js", "examples/quick/brand.py"])
@pytest.mark.parametrize(
    ("brand", "message"),
    [
        ('{"name": "F", "slug": "f"}', "brand.json needs non-empty strings for: mark."),
        (
            '{"name": "", "slug": 3, "mark": "m"}',
            "brand.json needs non-empty strings for: name, slug.",
        ),
        ("{not json", "brand.json is not valid JSON."),
        ("[]", "brand.json must be a JSON object."),
        ("null", "brand.json must be a JSON object."),
    ],
)
def test_the_brand_checks_fail_on_a_bad_brand_json(
    sandbox: BwrapSandbox,
    commit_files: Callable[[dict[str, str | bytes]], Committed],
    module: str,
    brand: str,
    message: str,
) -> None:
    """The repository's JavaScript check and its Python example agree, message for message."""
    source = (REPO_ROOT / module).read_text()
    quick = ".forkhorse/quick/" + module.rsplit("/", 1)[1]
    snapshot = commit_files({"brand.json": brand, quick: source}).snapshot
    record = sandbox.run_check(snapshot, QuickCheckDef(name="brand", module=quick))
    assert (record.outcome, record.message) == ("failed", message)


@pytest.mark.parametrize(
    "module", [".forkhorse/quick/large-files.js", "examples/quick/large_files.py"]
)
def test_the_unregistered_large_files_examples_use_stat(
    sandbox: BwrapSandbox, commit_files: Callable[[dict[str, str | bytes]], Committed], module: str
) -> None:
    definitions = parse_checks((REPO_ROOT / ".forkhorse/checks").read_text())
    assert all(getattr(d, "module", "") != module for d in definitions)
    quick = ".forkhorse/quick/" + module.rsplit("/", 1)[1]
    source = (REPO_ROOT / module).read_text()
    small = commit_files({"brand.json": "{}", quick: source, "a.bin": b"\0" * 100}).snapshot
    record = sandbox.run_check(small, QuickCheckDef(name="large-files-example", module=quick))
    assert (record.outcome, record.message) == ("passed", "No file is 10 MB or larger.")
    large = commit_files({quick: source, "big.bin": b"\0" * 10_000_000}).snapshot
    record = sandbox.run_check(large, QuickCheckDef(name="large-files-example", module=quick))
    assert (record.outcome, record.message) == ("failed", "Files of 10 MB or more: big.bin.")
