"""PromoteFunction: runs one promote job that ApiFunction queued (an asynchronous invoke),
to its end, under the project's workflow lease; the outcome is kept in the Store."""

from __future__ import annotations

from typing import Any

from forkhorse.api.aws import build_aws_service
from forkhorse.ports.jobs import PromoteJob
from forkhorse.service import Service

_service: Service | None = None


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    global _service
    if _service is None:
        _service = build_aws_service()
    job = PromoteJob.model_validate(event)
    ended = _service.promotions.run_job(job)
    return {"promotionId": job.promotion_id, "state": None if ended is None else ended.state}
