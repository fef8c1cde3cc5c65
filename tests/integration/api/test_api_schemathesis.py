"""schemathesis over the live `/openapi.json`: no generated request makes a 5xx.

Each operation's strategy is driven by Hypothesis directly (a bounded number of examples),
with the owner's token and without one.
"""

from __future__ import annotations

import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error

from tests.support.live import Server, new_lane, new_project

EXAMPLES_PER_OPERATION = 12


def test_no_generated_request_makes_a_server_error(server: Server) -> None:
    project = new_project(server, True)
    new_lane(project).request_review(project.initial)  # some real state to meet
    schema = schemathesis.openapi.from_url(f"{server.url}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 18
    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(
            max_examples=EXAMPLES_PER_OPERATION,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def call(case: schemathesis.Case) -> None:
            for headers in ({"Authorization": f"Bearer {server.owner_token}"}, {}):
                case.call_and_validate(
                    base_url=server.url, headers=headers, checks=[not_a_server_error]
                )

        call()
