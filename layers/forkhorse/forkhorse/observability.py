"""Logs, traces and metrics, the same for every Lambda handler and for `forkhorse serve`.

The Powertools logger is named after the service, `forkhorse`, so every package module's
`logging.getLogger(__name__)` propagates to it: on Lambda each line is JSON with the
invocation's context and correlation keys (project, review, generation, promotion). Its
level comes from `POWERTOOLS_LOG_LEVEL` (INFO in the template); without it only warnings
show, so CLI commands keep their output clean. `forkhorse serve` moves the same JSON lines
to `<home>/logs/` (`log_to_files`).

Metrics are CloudWatch EMF lines inside a Lambda invocation; anywhere else (the local
runner) they are log records named `metric` on the `forkhorse.metrics` logger, so the same
call never prints EMF locally; `forkhorse serve` writes them to `<home>/logs/metrics.jsonl`,
never to the terminal.

No log line carries a raw control character: the JSON lines' serializer and the terminal's
formatter (`log_to_terminal`) escape them (`domain.messages.escape_controls`), so a request
path, a header or a ref name an unauthenticated client sent cannot drive the operator's
terminal. Call sites need do nothing.
"""

from __future__ import annotations

import contextvars
import functools
import json
import logging
import os
import re
import sys
import warnings
from collections.abc import Callable, Mapping
from logging.handlers import RotatingFileHandler
from pathlib import Path
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit, single_metric

from forkhorse.domain.limits import LOCAL_LOG
from forkhorse.domain.messages import escape_controls
from forkhorse.domain.receipts import ReceiptSummary

SERVICE = "forkhorse"
NAMESPACE = "Forkhorse"
LOG_FILE = "forkhorse.jsonl"
METRICS_FILE = "metrics.jsonl"
METRICS_LOGGER = f"{SERVICE}.metrics"
# Libraries whose INFO is noise on an operator's terminal (dulwich logs each capability).
QUIET_LOGGERS = ("dulwich",)


def _log_json(log: dict[str, Any]) -> str:
    """Powertools' serializer (compact, UTF-8 kept) with DEL, C1 and the other characters
    JSON leaves raw escaped: a JSON line is as safe to print as the terminal's lines."""
    return escape_controls(json.dumps(log, default=str, separators=(",", ":"), ensure_ascii=False))


logger = Logger(
    service=SERVICE,
    level=os.environ.get("POWERTOOLS_LOG_LEVEL", "WARNING"),
    stream=sys.stderr,
    json_serializer=_log_json,
)
tracer = Tracer(service=SERVICE)  # a no-op outside Lambda (no LAMBDA_TASK_ROOT) and in tests
metrics = Metrics(namespace=NAMESPACE, service=SERVICE)

# Each metric goes out on its own (`emit`), so the shared set `log_metrics` flushes holds
# only the cold-start metric, and its "no metrics" warning would come on every invocation.
warnings.filterwarnings("ignore", message="No application metrics to publish")

_metric_log = logging.getLogger(METRICS_LOGGER)
_in_lambda: contextvars.ContextVar[bool] = contextvars.ContextVar("in_lambda", default=False)

Event = dict[str, Any]
Handler = Callable[[Event, Any], Any]
Correlate = Callable[[Event], Mapping[str, Any]]


def lambda_handler(correlate: Correlate | None = None) -> Callable[[Handler], Handler]:
    """Every function's handler: the invocation's context and `correlate(event)`'s keys on
    each log line (cleared between invocations), an X-Ray segment, and its metrics
    flushed as EMF when it returns."""

    def decorate(handler: Handler) -> Handler:
        @functools.wraps(handler)
        def correlated(event: Event, context: Any) -> Any:
            if correlate is not None:
                keys = {name: value for name, value in correlate(event).items() if value}
                logger.append_keys(**keys)
            token = _in_lambda.set(True)
            try:
                return handler(event, context)
            finally:
                _in_lambda.reset(token)

        traced = tracer.capture_lambda_handler(correlated, capture_response=False)
        logged = logger.inject_lambda_context(traced, log_event=False, clear_state=True)
        flushed: Handler = metrics.log_metrics(logged, capture_cold_start_metric=True)
        return flushed

    return decorate


# --- correlation keys -----------------------------------------------------------------------
_PROJECT_PATH = re.compile(r"^/(?:projects|git)/([^/]+)")
_REVIEW_PATH = re.compile(r"^/reviews/([^/]+)")


def api_keys(event: Event) -> dict[str, Any]:
    """The project or review an API or git request names in its path."""
    path = str(event.get("rawPath") or "")
    project, review = _PROJECT_PATH.match(path), _REVIEW_PATH.match(path)
    return {
        "project": project.group(1) if project else None,
        "review": review.group(1) if review else None,
    }


def run_keys(event: Event) -> dict[str, Any]:
    """A ReceiptRun step's execution: its project, review and generation."""
    run = event.get("run") or {}
    return {
        "project": run.get("projectId"),
        "review": run.get("reviewId"),
        "generation": run.get("generation"),
    }


def promote_keys(event: Event) -> dict[str, Any]:
    """A PromoteRun step's promotion and project, and its before-promote run's once known."""
    promotion = {"project": event.get("projectId"), "promotion": event.get("promotionId")}
    return {**run_keys(event), **promotion}


# --- metrics ---------------------------------------------------------------------------------
# Dimensions are only closed sets (outcome, tier): a check's name is the agent's to choose,
# and each distinct dimension value is a billed CloudWatch metric.
def run_finished(summary: ReceiptSummary) -> None:
    """A receipt run's end: its outcome, its duration and each check's."""
    count("Receipts", outcome=summary.status)
    if summary.duration_ms is not None:
        emit("RunDuration", MetricUnit.Milliseconds, summary.duration_ms, outcome=summary.status)
    for check in summary.checks:
        if check.duration_ms is not None:
            emit(
                "CheckDuration",
                MetricUnit.Milliseconds,
                check.duration_ms,
                tier=check.tier,
                outcome=check.outcome,
            )


def quick_gate_refused() -> None:
    """A run whose failed quick checks kept its full checks from starting."""
    count("QuickGateRefusals")


def promote_finished(outcome: str) -> None:
    """A promote workflow's outcome: done, failed or uncertain."""
    count("Promotes", outcome=outcome)


def log_checked(problems: int) -> None:
    """The transparency log's scheduled self-check: how many problems it found (alarmed
    above 0)."""
    emit("LogSelfCheckProblems", MetricUnit.Count, problems)


def count(name: str, **dimensions: str) -> None:
    emit(name, MetricUnit.Count, 1, **dimensions)


def emit(name: str, unit: MetricUnit, value: float, **dimensions: str) -> None:
    """One metric with its own dimensions: EMF inside a Lambda invocation, a log record
    anywhere else."""
    if not _in_lambda.get():
        _metric_log.info(
            "metric", extra={"metric": name, "unit": unit.value, "value": value, **dimensions}
        )
        return
    with single_metric(name=name, unit=unit, value=value, namespace=NAMESPACE) as metric:
        for dimension, label in dimensions.items():
            metric.add_dimension(name=dimension, value=label)


# --- local files and the terminal -----------------------------------------------------------
def _is_metric(record: logging.LogRecord) -> bool:
    return record.name == METRICS_LOGGER


def _not_metric(record: logging.LogRecord) -> bool:
    return record.name != METRICS_LOGGER


def log_to_files(logs: Path) -> list[RotatingFileHandler]:
    """Send the package's log records, INFO and up, as JSON lines to `logs/forkhorse.jsonl`
    instead of stderr, and its metrics to `logs/metrics.jsonl`, each rotated at
    `LOCAL_LOG`'s bound. Returns both handlers (the log's first)."""
    logs.mkdir(mode=0o700, parents=True, exist_ok=True)
    package = logging.getLogger(SERVICE)
    handler = _json_file(logs / LOG_FILE, _not_metric)
    metrics_handler = _json_file(logs / METRICS_FILE, _is_metric)
    stream = logger.registered_handler
    package.addHandler(handler)
    package.addHandler(metrics_handler)
    package.removeHandler(stream)  # its formatter, shared, still takes append_keys
    package.setLevel(logging.INFO)
    return [handler, metrics_handler]


def _json_file(path: Path, accept: Callable[[logging.LogRecord], bool]) -> RotatingFileHandler:
    handler = RotatingFileHandler(
        path, maxBytes=LOCAL_LOG.file_bytes, backupCount=LOCAL_LOG.backups, encoding="utf-8"
    )
    handler.setFormatter(logger.registered_formatter)
    handler.addFilter(accept)
    return handler


CONTINUATION = "\n  | "


class TerminalFormatter(logging.Formatter):
    """One line per record for a terminal: its message with every control character escaped
    (a newline a client sent cannot forge a line), then the whole record, traceback included,
    with all but newlines and tabs escaped, and each of its further lines marked `  | ` (an
    exception's text cannot pass for a record of its own either)."""

    def format(self, record: logging.LogRecord) -> str:
        safe = logging.makeLogRecord(vars(record))  # other handlers keep the original
        safe.msg, safe.args = escape_controls(record.getMessage()), None
        safe.exc_info, safe.exc_text = None, None
        text = super().format(safe)
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        elif record.exc_text:
            text += "\n" + record.exc_text
        return escape_controls(text, keep="\n\t").replace("\n", CONTINUATION)


def log_to_terminal(level: int = logging.INFO) -> logging.Handler:
    """The root logger's stderr handler for `forkhorse serve`: escaped lines, no metrics
    (they have their own file), and quiet libraries at WARNING."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(TerminalFormatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    handler.addFilter(_not_metric)
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(level)
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    return handler
