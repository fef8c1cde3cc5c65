"""LogPublisherFunction: tiles and a signed checkpoint for everything the transparency log's
ledger holds (see forkhorse.service.log_publishing). Each append invokes it asynchronously.
Its schedule first settles the intents a crash left (forkhorse.service.log_repair), then
publishes, which covers what a lost invoke left, then runs the incremental self-check,
whose problems it reports as the LogSelfCheckProblems metric. Its reserved concurrency of 1
keeps publishes from overlapping."""

from typing import Any

from forkhorse.observability import lambda_handler, log_checked
from forkhorse.service.log_repair import repair_intents
from forkhorse.wiring.aws import LogPublisherDeps, log_publisher

SCHEDULED = "Scheduled Event"

_deps: LogPublisherDeps | None = None


@lambda_handler()
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    global _deps
    if _deps is None:
        _deps = log_publisher()
        # A new container may sign with a new key (SigningKey changed): the rotation is logged.
        transparency = _deps.context.gate_log.log
        if transparency is not None:
            transparency.log_key_change()
    if event.get("detail-type") != SCHEDULED:
        head = _deps.publishing.publish()
        return {"size": head.size, "published": head.published}
    repair = repair_intents(_deps.context)
    head = _deps.publishing.publish()
    report = _deps.check.run()
    log_checked(len(report["problems"]))
    return {
        "size": head.size,
        "published": head.published,
        "repaired": {"appended": repair.appended, "dropped": repair.dropped},
        "ok": report["ok"],
        "problems": report["problems"],
    }
