"""Invariant 10: evidence is signed by the trusted finalize step only; sandboxes never see
a key. A hostile quick check (bubblewrap) and a hostile full check (podman) each search for
the home's signing key (its directory, its file names and a fragment of its secret bytes)
and find nothing, while the finalize step signs their record with that very key."""

from __future__ import annotations

import pytest

from tests.support.runner import World

pytestmark = pytest.mark.sandbox

QUICK_HUNT = """\
import os

KEYS = {keys!r}
KEYID = {keyid!r}
SECRET = {head!r} + {tail!r}  # split: this file's own bytes must not match
LIMIT = 20000  # files looked at: the walk must end well inside the quick deadline


def check(ctx):
    found = [KEYS] if os.path.exists(KEYS) else []
    seen = 0
    for root, dirs, files in os.walk("/"):
        dirs[:] = [d for d in dirs if os.path.join(root, d) not in ("/proc", "/sys", "/dev")]
        for name in files:
            seen += 1
            path = os.path.join(root, name)
            if KEYID in name:
                found.append(path)
                continue
            try:
                with open(path, "rb") as handle:
                    if SECRET in handle.read(1 << 20):
                        found.append(path)
            except OSError:
                pass
            if seen >= LIMIT:
                break
        if seen >= LIMIT:
            break
    if found:
        return {{"ok": False, "message": "found: " + ", ".join(found[:5])}}
    return {{"ok": True, "message": "searched %d files: no key" % seen}}
"""

# The needle is assembled at run time, so this script's own bytes do not match it.
FULL_HUNT = """\
if ls -d {keys} 2>/dev/null; then exit 1; fi
needle="{head}""{tail}"
files() {{ find / /workspace /tmp -xdev -type f -size -1024k 2>/dev/null; }}
found=$(files | xargs grep -lF "$needle" 2>/dev/null)
named=$(find / /workspace /tmp -xdev -name '*{keyid}*' 2>/dev/null)
if [ -n "$found$named" ]; then echo "found: $found $named"; exit 1; fi
echo "searched: no key"
"""


def test_neither_sandbox_can_find_the_signing_key(world: World) -> None:
    home = world.runtime.home
    attestor = world.runtime.deps.attestor
    assert attestor is not None
    signer = attestor.signer
    assert signer is not None
    keyid = signer.public_key.keyid
    private = (home / "keys" / f"{keyid}.key").read_text()
    assert "PRIVATE KEY" in private  # the key is really there, on the host
    secret = private.splitlines()[2][:32]  # a fragment of its body, not its PEM armour
    keys = str(home / "keys")
    checks = (
        '[{"name":"hunt-quick","tier":"quick","module":".forkhorse/quick/hunt.py"},'
        '{"name":"hunt-full","tier":"full","image":"busybox","run":"sh hunt.sh"}]'
    )
    run = world.review(
        {
            ".forkhorse/checks": checks,
            ".forkhorse/quick/hunt.py": QUICK_HUNT.format(
                keys=keys, keyid=keyid, head=secret[:16].encode(), tail=secret[16:].encode()
            ),
            "hunt.sh": FULL_HUNT.format(keys=keys, keyid=keyid, head=secret[:16], tail=secret[16:]),
        }
    )
    world.run(run)
    record = world.record(run.review_id)
    quick, full = record.checks
    assert quick.outcome == "passed", quick.message
    assert full.outcome == "passed", full.stdout
    assert quick.message.endswith(": no key")
    assert int(quick.message.split()[1]) > 0  # it really walked a filesystem
    assert world.containers.started, "the full check ran in a real container"
    # ... and the trusted finalize step signed this record with that key.
    summary = world.summary(run.review_id)
    assert summary is not None
    assert summary.digest is not None
    envelope = attestor.receipt_envelope(summary.digest)
    assert envelope is not None
    assert [s["keyid"] for s in envelope["signatures"]] == [keyid]
