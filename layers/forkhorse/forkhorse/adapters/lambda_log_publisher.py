"""Publishing the log on AWS: an append asks LogPublisherFunction, the one function the key
lets sign checkpoints, to publish, by an asynchronous invoke (`InvocationType=Event`).

The appender does not wait for the checkpoint. Lambda queues the event (a throttled one too:
the function's reserved concurrency of 1 serializes publishes) and retries it; an invoke
that fails outright is logged and left to the function's schedule, which publishes whatever
the ledger holds beyond the newest checkpoint, so an append never fails for its publish.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING

from botocore.exceptions import BotoCoreError, ClientError

if TYPE_CHECKING:
    from mypy_boto3_lambda import LambdaClient

log = logging.getLogger(__name__)

# The request's event (events/log_publish.json): anything but the schedule's only publishes.
PUBLISH_REQUEST = {"source": "forkhorse.log", "detail-type": "Publish"}


class LambdaLogPublisher:
    def __init__(self, client: LambdaClient, function_name: str) -> None:
        self._client = client
        self._function = function_name

    def request(self) -> None:
        try:
            self._client.invoke(
                FunctionName=self._function,
                InvocationType="Event",
                Payload=json.dumps(PUBLISH_REQUEST).encode(),
            )
        except (ClientError, BotoCoreError) as failed:
            log.error(
                "could not ask %s to publish the log (its schedule will): %s",
                self._function,
                failed,
            )
