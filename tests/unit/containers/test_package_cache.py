"""The user's apt package cache keeps only what the last default-image build installed, so it
stays the size of one image's packages however many Debian point releases go by."""

from __future__ import annotations

from pathlib import Path

from forkhorse.adapters.containers.images import installed_debs, prune_package_cache

STATUS = """Package: git
Status: install ok installed
Architecture: amd64
Version: 1:2.39.5-0+deb12u3
Description: fast, scalable, distributed revision control system
 Version: 9.9 is part of the description, not a field

Package: ca-certificates
Status: install ok installed
Architecture: all
Version: 20250419~deb12u2
"""


def test_the_cache_keeps_the_installed_packages_and_drops_the_rest(tmp_path: Path) -> None:
    rootfs, archives = tmp_path / "rootfs", tmp_path / "apt-archives"
    (rootfs / "var/lib/dpkg").mkdir(parents=True)
    (rootfs / "var/lib/dpkg/status").write_text(STATUS, encoding="utf-8")
    archives.mkdir()
    kept = {"git_1%3a2.39.5-0+deb12u3_amd64.deb", "ca-certificates_20250419~deb12u2_all.deb"}
    dropped = {"git_1%3a2.39.2-1_amd64.deb", "npm_9.2.0~ds1-1_all.deb"}
    for name in kept | dropped | {"lock"}:
        (archives / name).write_bytes(b"deb")
    (archives / "partial").mkdir()

    assert installed_debs(rootfs) == kept
    prune_package_cache(installed_debs(rootfs), archives)
    assert {path.name for path in archives.iterdir()} == kept | {"lock", "partial"}
