"""Without the `client` extra (no httpx, no MCP SDK) `forkhorse serve` still serves: the
service never imports the client's dependencies (issue 29)."""

from __future__ import annotations

from pathlib import Path

import requests

from tests.support.serve import ServeProcess, free_port
from tests.unit.client.test_cli_startup import WITHOUT_CLIENT_EXTRA


def test_serve_runs_without_the_client_extra(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(WITHOUT_CLIENT_EXTRA)
    process = ServeProcess(tmp_path / "home", free_port(), env={"PYTHONPATH": str(site)})
    process.start()  # waits for /openapi.json to answer 200
    try:
        assert requests.get(process.url + "/", timeout=30).status_code == 200
        assert requests.get(process.url + "/projects", timeout=30).status_code == 401
    finally:
        process.stop()
    assert "ModuleNotFoundError" not in process.log.read_text()
