"""Where promote jobs run on AWS: the PromoteFunction (locally: `ThreadPromoteJobs`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from forkhorse.ports.jobs import PromoteJob

if TYPE_CHECKING:
    from mypy_boto3_lambda import LambdaClient


class LambdaPromoteJobs:
    """AWS: an asynchronous (`Event`) invoke of the PromoteFunction, whose handler runs
    the job; Lambda queues the event and the API's response need not wait for it."""

    def __init__(self, client: LambdaClient, function_name: str) -> None:
        self._client = client
        self._function = function_name

    def start(self, job: PromoteJob, run: Callable[[PromoteJob], object]) -> None:
        if not self._function:
            raise RuntimeError("PROMOTE_FUNCTION_NAME is not configured")
        response = self._client.invoke(
            FunctionName=self._function,
            InvocationType="Event",
            Payload=job.model_dump_json().encode(),
        )
        if response.get("StatusCode") != 202:
            raise RuntimeError(f"the promote job was not queued: {response.get('StatusCode')}")
