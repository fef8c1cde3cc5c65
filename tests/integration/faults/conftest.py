"""The fault campaigns' fixtures: the busybox image, recorded once per test's registry."""

from pathlib import Path

import pytest
from forkhorse.adapters.containers.images import ImageRegistry


@pytest.fixture
def images(tmp_path: Path, busybox_ref: str) -> Path:
    directory = tmp_path / "images"
    ImageRegistry(directory).record("busybox", busybox_ref)
    return directory
