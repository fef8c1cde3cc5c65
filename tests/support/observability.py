"""The package's log records and metrics as a test sees them."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from forkhorse.observability import SERVICE, logger


@contextmanager
def captured_log() -> Iterator[io.StringIO]:
    """The package's records, INFO and up, as the JSON lines Lambda's log stream gets (the
    Powertools formatter, with the invocation's context and correlation keys)."""
    package = logging.getLogger(SERVICE)
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logger.registered_formatter)
    level = package.level
    package.addHandler(handler)
    package.setLevel(logging.INFO)
    try:
        yield stream
    finally:
        package.removeHandler(handler)
        package.setLevel(level)


def json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def emf_metrics(stdout: str) -> list[dict[str, Any]]:
    """Powertools' EMF lines (its documented test approach: capture stdout), one dict per
    metric: name, value and dimensions."""
    found = []
    for line in json_lines(stdout):
        if "_aws" not in line:
            continue
        [directive] = line["_aws"]["CloudWatchMetrics"]
        dimensions = {name: line[name] for group in directive["Dimensions"] for name in group}
        for metric in directive["Metrics"]:
            found.append(
                {
                    "namespace": directive["Namespace"],
                    "name": metric["Name"],
                    "unit": metric["Unit"],
                    "value": line[metric["Name"]],
                    **dimensions,
                }
            )
    return found
