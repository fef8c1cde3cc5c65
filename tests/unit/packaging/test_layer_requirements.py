"""The Lambda layer installs exactly the package's pinned runtime dependencies."""

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_the_layer_pins_what_the_package_pins() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    layer = (ROOT / "layers/forkhorse/requirements.txt").read_text().split()
    assert sorted(layer) == sorted(project["dependencies"])
    assert all("==" in requirement for requirement in layer), "every runtime pin is exact"


CLIENT_ONLY = {"httpx", "mcp"}


def test_only_the_client_uses_the_client_extra() -> None:
    """The Lambda layer lacks httpx and mcp, so no server-side module may import them."""
    package = ROOT / "layers/forkhorse/forkhorse"
    offenders = []
    for path in package.rglob("*.py"):
        if "client" in path.relative_to(package).parts[:1]:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue  # `global`/`nonlocal` have `names` too, as plain strings
            offenders += [f"{path}: {n}" for n in names if n.split(".")[0] in CLIENT_ONLY]
    assert offenders == []
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert {pin.split("==")[0] for pin in extras["optional-dependencies"]["client"]} == CLIENT_ONLY
