"""`forkhorse image build|list`, wired through the `register(subparsers)` the CLI calls."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
from forkhorse import cli_image as cli
from forkhorse.adapters.containers.images import ImageRegistry

pytestmark = pytest.mark.podman


def forkhorse(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="forkhorse")
    cli.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    code: int = args.func(args)
    return code


def test_build_busybox_records_a_digest(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert forkhorse("image", "--home", str(tmp_path), "build", "busybox") == 0
    reference = ImageRegistry(tmp_path).resolve("busybox")
    assert reference.startswith("localhost/forkhorse/busybox@sha256:")
    assert reference in capsys.readouterr().out
    # Recorded as JSON in the state directory, never anything mutable.
    assert json.loads((tmp_path / "images.json").read_text()) == {"busybox": reference}


def test_build_if_missing_does_nothing_when_present(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    forkhorse("image", "--home", str(tmp_path), "build", "busybox")
    capsys.readouterr()
    assert forkhorse("image", "--home", str(tmp_path), "build", "busybox", "--if-missing") == 0
    assert "is present" in capsys.readouterr().out


def test_list_shows_names_digests_and_presence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert forkhorse("image", "--home", str(tmp_path), "list") == 0
    assert "No images" in capsys.readouterr().out
    forkhorse("image", "--home", str(tmp_path), "build", "busybox")
    ImageRegistry(tmp_path).record("gone", "localhost/forkhorse/gone@sha256:" + "0" * 64)
    capsys.readouterr()
    forkhorse("image", "--home", str(tmp_path), "list")
    lines = dict(line.split("\t", 1) for line in capsys.readouterr().out.splitlines())
    assert lines["busybox"].endswith("\tpresent")
    assert lines["gone"].endswith("\tmissing")


def test_unknown_image_names_cannot_be_built(tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        forkhorse("image", "--home", str(tmp_path), "build", "node:latest")
