"""The full checks' seccomp profile: podman's default, minus every way to a new namespace.

podman's default profile lets a container call `unshare`, `setns`, `clone` with CLONE_NEW*
flags and `clone3`, so a check could create user namespaces (and, inside one, mount and
network namespaces of its own). This profile keeps everything else of the default and:
- refuses `unshare` and `setns` with EPERM;
- allows `clone` only when no CLONE_NEW* flag is set (threads and fork still work);
- leaves `clone3` to the default action, ENOSYS: its flags sit in memory where seccomp cannot
  read them, and ENOSYS makes the C library fall back to `clone`.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

DEFAULT_PROFILES = (
    Path("/usr/share/containers/seccomp.json"),
    Path("/etc/containers/seccomp.json"),
)
# CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET. (CLONE_NEWTIME exists only
# for clone3: in clone's first argument its bit belongs to the exit signal.)
CLONE_NEW_FLAGS = 0x7E020000
_NAMESPACE_CALLS = frozenset({"unshare", "setns", "clone", "clone3"})
_EPERM = 1


class SeccompProfileMissing(RuntimeError):
    """podman's default seccomp profile was not found (package containers-common)."""


def _without_namespace_calls(rule: dict[str, Any]) -> dict[str, Any] | None:
    names = [name for name in rule.get("names", []) if name not in _NAMESPACE_CALLS]
    return {**rule, "names": names} if names else None


def _namespace_rules() -> list[dict[str, Any]]:
    return [
        {"names": ["unshare", "setns"], "action": "SCMP_ACT_ERRNO", "errnoRet": _EPERM},
        {
            "names": ["clone"],
            "action": "SCMP_ACT_ALLOW",
            "args": [
                {"index": 0, "value": CLONE_NEW_FLAGS, "valueTwo": 0, "op": "SCMP_CMP_MASKED_EQ"}
            ],
        },
    ]


def check_profile(default: dict[str, Any]) -> dict[str, Any]:
    """The default profile with its namespace calls replaced by `_namespace_rules`."""
    if default.get("defaultAction") not in ("SCMP_ACT_ERRNO", "SCMP_ACT_KILL_PROCESS"):
        raise SeccompProfileMissing("podman's default seccomp profile does not deny by default.")
    kept = [rule for rule in map(_without_namespace_calls, default["syscalls"]) if rule]
    return {**default, "syscalls": kept + _namespace_rules()}


def write_check_profile(destination: Path) -> Path:
    """Generate the profile from podman's default into `destination` (atomically)."""
    source = next((path for path in DEFAULT_PROFILES if path.is_file()), None)
    if source is None:
        raise SeccompProfileMissing("podman's default seccomp profile is missing.")
    profile = check_profile(json.loads(source.read_text(encoding="utf-8")))
    destination.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=destination.parent, prefix=".seccomp-")
    with os.fdopen(handle, "w", encoding="utf-8") as output:
        json.dump(profile, output, indent=1)
    os.replace(temporary, destination)
    return destination
