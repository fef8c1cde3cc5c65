"""CollectGarbageFunction, hourly: records nothing references, chunks a crashed put left
without a manifest and S3 packs no ref reaches, each once older than the grace period
(see forkhorse.runner.collector)."""

from typing import Any

from forkhorse.ports.clock import SystemClock
from forkhorse.runner.collector import collect
from forkhorse.wiring.aws import git_host, table_store
from forkhorse.wiring.handlers import logger


@logger.inject_lambda_context(log_event=False)
def handler(event: dict[str, Any], context: Any) -> dict[str, int]:
    collection = collect(table_store(), SystemClock().now(), packs=git_host())
    logger.info("collected", extra=collection.counts())
    return collection.counts()
