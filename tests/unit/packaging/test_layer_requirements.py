"""The Lambda layer installs exactly the package's pinned runtime dependencies."""

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_the_layer_pins_what_the_package_pins() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    layer = (ROOT / "layers/forkhorse/requirements.txt").read_text().split()
    assert sorted(layer) == sorted(project["dependencies"])
    assert all("==" in requirement for requirement in layer), "every runtime pin is exact"
