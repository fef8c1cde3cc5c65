"""Image builds: reproducible digests, reuse of an identical image by its inputs label, one
cache per user, and a progress line per stage with the full output kept in a log file."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from forkhorse.adapters.containers.images import (
    BUSYBOX_IMAGE,
    ImageRegistry,
    build_busybox_image,
    build_log,
    build_rootfs_image,
    busybox_rootfs_tar,
    find_built,
    inputs_digest,
    logged,
    user_cache_dir,
)
from forkhorse.adapters.containers.podman_cli import ULIMIT_FLAGS, Podman
from forkhorse.ports.containers import ImageUnresolved

CHANGES = ("ENV PATH=/bin", "WORKDIR /workspace")


@pytest.mark.podman
def test_a_rebuild_from_the_same_inputs_gives_the_same_digest(
    tmp_path: Path, podman: Podman
) -> None:
    tarball = tmp_path / "rootfs.tar"
    tarball.write_bytes(busybox_rootfs_tar())
    inputs = inputs_digest(uuid.uuid4().hex)  # an image of this test's own, removed below
    name = f"repro-{inputs[:12]}"
    try:
        first = build_rootfs_image(podman, name, tarball, CHANGES, inputs)
        podman.output("rmi", "--force", first)
        tarball.write_bytes(busybox_rootfs_tar())  # made again from scratch too
        second = build_rootfs_image(podman, name, tarball, CHANGES, inputs)
        assert second == first
        assert find_built(podman, name, inputs) == first
        ran = podman.output("run", "--rm", "--network", "none", *ULIMIT_FLAGS, first, "echo", "ok")
        assert ran.strip() == "ok"
    finally:
        podman.run("rmi", "--force", f"localhost/forkhorse/{name}:latest")
    assert find_built(podman, name, inputs) is None


@pytest.mark.podman
def test_an_identical_image_is_reused_whatever_the_home(tmp_path: Path, podman: Podman) -> None:
    first = build_busybox_image(ImageRegistry(tmp_path / "home-a"), podman)
    said: list[str] = []
    second = build_busybox_image(ImageRegistry(tmp_path / "home-b"), podman, said.append)
    assert second == first
    assert said == [f"Reusing {first}: built from the same inputs."]
    assert ImageRegistry(tmp_path / "home-b").resolve(BUSYBOX_IMAGE) == first


def test_the_cache_is_one_per_user(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert user_cache_dir() == (tmp_path / "xdg" / "forkhorse").resolve()
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    assert user_cache_dir() == (tmp_path / "user" / ".cache" / "forkhorse").resolve()


def test_a_failed_step_keeps_its_output_in_a_log_it_names(tmp_path: Path) -> None:
    with pytest.raises(ImageUnresolved) as failed, build_log(tmp_path, "default") as log:
        logged(["sh", "-c", "echo resolving packages; echo E: no such package >&2; exit 3"], log)
    message = str(failed.value)
    assert "sh exited 3" in message
    path = Path(message.rsplit("The full build log is ", 1)[1].rstrip("."))
    assert path.parent == tmp_path / "logs"
    text = path.read_text()
    assert "resolving packages" in text
    assert "E: no such package" in text
