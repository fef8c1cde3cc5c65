"""How `make test` spreads the suite over pytest-xdist workers.

Most tests wait on subprocesses (podman, bubblewrap, git, the crash-point workers), so more
workers than cores still shortens the run. A module stays on one worker, as `--dist
loadscope` would keep it: its module-scoped servers are built once and its tests run in
their written order. The crash-point campaigns are the exception: each of their tests walks
the whole path in its own home, so they spread test by test over every worker.
"""

from __future__ import annotations

from typing import Any

import pytest
from xdist.scheduler import LoadScopeScheduling

# Directories whose every test is independent (function-scoped homes, no module fixtures).
SPREAD_TEST_BY_TEST = ("tests/integration/faults/",)


class CampaignSpreadScheduling(LoadScopeScheduling):  # type: ignore[misc]  # xdist is untyped
    def _split_scope(self, nodeid: str) -> str:
        if nodeid.startswith(SPREAD_TEST_BY_TEST):
            return nodeid
        scope: str = super()._split_scope(nodeid)
        return scope


@pytest.hookimpl(trylast=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> CampaignSpreadScheduling:
    return CampaignSpreadScheduling(config, log)
