"""`forkhorse image build default|busybox` and `forkhorse image list`.

The registry of image names to `@sha256:` references lives in the state directory
(`FORKHORSE_HOME`, default `.forkhorse-local`); nothing is pulled from an image registry.
The adapters come from the local composition root (`wiring.local.local_images`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from forkhorse.ports.containers import ContainerError
from forkhorse.wiring.local import IMAGE_NAMES, local_images
from forkhorse.wiring.settings import LocalSettings


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    image = subparsers.add_parser("image", help="build and list local check images")
    image.add_argument("--home", type=Path, default=None, help="state directory")
    actions = image.add_subparsers(dest="image_command", required=True)
    build = actions.add_parser("build", help="build a local image and record its digest")
    build.add_argument("name", choices=IMAGE_NAMES)
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
    # The image build mounts and syncs absolute paths, and the cwd may change later.
    return (home or Path(LocalSettings.from_environ().home)).resolve()


def _build(args: argparse.Namespace) -> int:
    images = local_images(_home(args))
    known = images.registry.entries().get(args.name)
    if args.if_missing and known and images.present(known):
        print(f"Image {args.name} is present: {known}")
        return 0
    try:
        reference = images.build(args.name, rebuild=args.rebuild)
    except ContainerError as error:
        print(f"Image build failed: {error}")
        return 1
    print(f"{args.name} {reference}")
    return 0


def _list(args: argparse.Namespace) -> int:
    images = local_images(_home(args))
    entries = images.registry.entries()
    if not entries:
        print("No images. Build one: forkhorse image build default")
    for name, reference in sorted(entries.items()):
        state = "present" if images.present(reference) else "missing"
        print(f"{name}\t{reference}\t{state}")
    return 0
