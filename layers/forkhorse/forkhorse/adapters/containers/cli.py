"""`forkhorse image build default|busybox` and `forkhorse image list`.

The registry of image names to `@sha256:` references lives in the state directory
(`FORKHORSE_HOME`, default `.forkhorse-local`); nothing is pulled from an image registry.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from forkhorse.adapters.containers.images import (
    BUSYBOX_IMAGE,
    DEFAULT_IMAGE,
    ImageRegistry,
    build_busybox_image,
    build_default_image,
    image_present,
    user_cache_dir,
)
from forkhorse.adapters.containers.podman_cli import Podman
from forkhorse.ports.containers import ContainerError

DEFAULT_HOME = ".forkhorse-local"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    image = subparsers.add_parser("image", help="build and list local check images")
    image.add_argument("--home", type=Path, default=None, help="state directory")
    actions = image.add_subparsers(dest="image_command", required=True)
    build = actions.add_parser("build", help="build a local image and record its digest")
    build.add_argument("name", choices=(DEFAULT_IMAGE, BUSYBOX_IMAGE))
    build.add_argument(
        "--if-missing", action="store_true", help="do nothing when the image is already built"
    )
    build.add_argument(
        "--rebuild", action="store_true", help="build even if an identical image exists"
    )
    build.set_defaults(func=_build)
    listing = actions.add_parser("list", help="list image names and their digests")
    listing.set_defaults(func=_list)


def _home(args: argparse.Namespace) -> Path:
    home: Path | None = args.home
    # debootstrap refuses a relative cache directory, and the cwd may change later.
    return (home or Path(os.environ.get("FORKHORSE_HOME", DEFAULT_HOME))).resolve()


def _build(args: argparse.Namespace) -> int:
    home, podman = _home(args), Podman()
    registry = ImageRegistry(home)
    known = registry.entries().get(args.name)
    if args.if_missing and known and image_present(podman, known):
        print(f"Image {args.name} is present: {known}")
        return 0
    try:
        if args.name == DEFAULT_IMAGE:
            print("Building the default image (Debian nodejs, npm, git); about a minute.")
            reference = build_default_image(
                registry, podman, user_cache_dir(), rebuild=args.rebuild
            )
        else:
            reference = build_busybox_image(registry, podman)
    except ContainerError as error:
        print(f"Image build failed: {error}")
        return 1
    print(f"{args.name} {reference}")
    return 0


def _list(args: argparse.Namespace) -> int:
    podman = Podman()
    entries = ImageRegistry(_home(args)).entries()
    if not entries:
        print("No images. Build one: forkhorse image build default")
    for name, reference in sorted(entries.items()):
        state = "present" if image_present(podman, reference) else "missing"
        print(f"{name}\t{reference}\t{state}")
    return 0
