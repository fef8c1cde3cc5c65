"""What the soak's agents commit: the demo's checks (a bubblewrap quick check and `npm test`
in the default image) for the working project, and hostile checks for the other one.

Every commit is a few hundred bytes on top of its parent, so a repository grows by a
bounded amount per push and the soak's duration bounds the rest.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from forkhorse.demo import README, README_CHECK, SMOKE_CHECKS

from tests.integration.api.support import Client, Worktree

# The demo's `npm test`, failing while a FAIL file is committed: agents push both.
PACKAGE = (
    '{"scripts":{"test":"node -e \\"process.exit(require(\'fs\').existsSync(\'FAIL\') ? 1 : 0)'
    '\\""}}\n'
)
WORKING_FILES: Mapping[str, str] = {
    "README.md": README,
    "package.json": PACKAGE,
    ".forkhorse/checks": SMOKE_CHECKS,
    ".forkhorse/quick/readme.py": README_CHECK,
}
FAILING_EVERY = 4  # every 4th working push fails its full check

SPIN = "def check(ctx):\n    while True:\n        pass\n"
NETWORK = (
    "import socket\n\n\n"
    "def check(ctx):\n"
    "    # Reaching any address from a quick check would be an escape; the soak's own server\n"
    "    # on loopback is the only target.\n"
    "    with socket.create_connection(('127.0.0.1', {port}), timeout=2):\n"
    "        return {{'ok': True, 'message': 'reached the network'}}\n"
)
# Node allocates and touches 64 MiB buffers until the container's memory limit stops it.
MEMORY_HOG = "node -e 'const held = []; for (;;) held.push(Buffer.alloc(1 << 26, 1))'"


def _quick(name: str, source: str) -> dict[str, str]:
    module = f".forkhorse/quick/{name}.py"
    checks = [{"name": name, "tier": "quick", "module": module}]
    return {".forkhorse/checks": json.dumps(checks) + "\n", module: source}


def hostile_variants(port: int) -> dict[str, dict[str, str]]:
    """Each hostile commit's files by variant; none of them may ever pass."""
    hog = [{"name": "hog", "tier": "full", "image": "default", "run": MEMORY_HOG}]
    return {
        "quick-spin": _quick("spin", SPIN),
        "quick-network": _quick("network", NETWORK.format(port=port)),
        "full-memory": {".forkhorse/checks": json.dumps(hog) + "\n"},
    }


@dataclass
class Lane:
    """One agent on one packet of one project, with its fork and a local worktree."""

    project: str
    agent_id: str
    token: str
    packet: str
    fork_id: str
    fork_url: str
    canonical_url: str
    tree: Worktree
    pushes: int = field(default=0)

    def working_change(self, name: str) -> dict[str, str]:
        """A small change of this agent's own file; every FAILING_EVERY-th one fails."""
        self.pushes += 1
        failing = self.tree.path / "FAIL"
        if self.pushes % FAILING_EVERY == 0:
            return {f"work/{name}.txt": f"{name} push {self.pushes}\n", "FAIL": "fail\n"}
        failing.unlink(missing_ok=True)
        return {f"work/{name}.txt": f"{name} push {self.pushes}\n"}


def seed_project(
    url: str, owner_token: str, name: str, files: Mapping[str, str], work: Path
) -> tuple[str, str]:
    """A required-mode project whose canonical holds `files`: its id and clone URL."""
    owner = Client(url, owner_token)
    body = {"name": name, "requireReceipt": True}
    project = owner.ok("POST", "/projects", body, expect=201)["project"]
    tree = Worktree(work / f"seed-{name}")
    tree.commit(dict(files), "Initial import")
    tree.push(project["cloneUrl"], owner_token)
    return project["id"], project["cloneUrl"]
