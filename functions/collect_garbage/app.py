"""CollectGarbageFunction, hourly: records nothing references, chunks a crashed put left
without a manifest and S3 packs no ref reaches, each once older than the grace period
(see forkhorse.runner.upkeep.collector)."""

from typing import Any

from forkhorse.observability import lambda_handler, logger
from forkhorse.ports.clock import SystemClock
from forkhorse.runner.upkeep.collector import collect
from forkhorse.wiring.aws import git_host, table_store


@lambda_handler()
def handler(event: dict[str, Any], context: Any) -> dict[str, int]:
    collection = collect(table_store(), SystemClock().now(), packs=git_host())
    logger.info("collected", extra=collection.counts())
    return collection.counts()
