"""No log line carries a raw control character (issue 29): what a client sent (a path, a
header, a ref name) reaches the terminal and the JSON files escaped, whatever the call site
passed, messages, arguments, fields and tracebacks alike. Metrics stay off the terminal."""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from forkhorse import observability
from forkhorse.domain.messages import escape_controls

HOSTILE = "refs/heads/\x1b]0;owned\x07\x1b[2J\x7f\x9b31m\u202e\n2026-01-01 INFO forged"
# Any raw C0 control but the line's own newline, DEL, or a C1 control.
RAW_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f]")


@pytest.fixture
def package() -> Iterator[logging.Logger]:
    logger = logging.getLogger(observability.SERVICE)
    handlers, level = list(logger.handlers), logger.level
    yield logger
    for handler in list(logger.handlers):
        if handler not in handlers:
            logger.removeHandler(handler)
            handler.close()
    for handler in handlers:
        if handler not in logger.handlers:
            logger.addHandler(handler)
    logger.setLevel(level)


def test_escape_controls_shows_every_terminal_control_as_an_escape() -> None:
    assert escape_controls("a\x1b[31mb\x07\x7f\x9b\u202ec") == (
        "a\\u001b[31mb\\u0007\\u007f\\u009b\\u202ec"
    )
    assert escape_controls("keep\nthis", keep="\n") == "keep\nthis"
    assert escape_controls("plain ascii, é and 漢字") == "plain ascii, é and 漢字"
    # The escapes are JSON's own: an escaped JSON line still parses to the original text.
    assert json.loads(escape_controls(json.dumps("\x7f\x9b", ensure_ascii=False))) == "\x7f\x9b"


def test_the_terminal_formatter_escapes_message_arguments_and_tracebacks() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(observability.TerminalFormatter("%(levelname)s %(name)s %(message)s"))
    log = logging.getLogger("forkhorse.githttp.http.test")
    log.addHandler(handler)
    log.propagate = False
    try:
        log.warning("refused a push of %s", HOSTILE)
        try:
            raise ValueError(HOSTILE)
        except ValueError:
            log.exception("failed on %s", HOSTILE)
    finally:
        log.removeHandler(handler)
        log.propagate = True
    text = stream.getvalue()
    assert RAW_CONTROL.search(text) is None, repr(text)
    assert "\\u001b]0;owned\\u0007" in text
    # A newline the client sent is escaped: it cannot forge a log line of its own.
    assert not any(line.startswith("2026-01-01 INFO forged") for line in text.splitlines())


def test_the_json_files_escape_and_metrics_have_their_own(
    package: logging.Logger, tmp_path: Path
) -> None:
    observability.log_to_files(tmp_path)
    logging.getLogger("forkhorse.githttp.wire").info(
        "refused a push: %s", HOSTILE, extra={"ref": HOSTILE}
    )
    observability.count("Receipts", outcome="passed")
    for handler in package.handlers:
        handler.flush()
    raw = (tmp_path / observability.LOG_FILE).read_text(encoding="utf-8")
    assert RAW_CONTROL.search(raw) is None, repr(raw)
    [line] = [json.loads(text) for text in raw.splitlines() if "refused a push" in text]
    assert line["ref"] == HOSTILE  # escaped in the file, the same text once parsed
    assert '"message":"metric"' not in raw
    metrics = (tmp_path / observability.METRICS_FILE).read_text(encoding="utf-8").splitlines()
    [metric] = [json.loads(text) for text in metrics]
    assert (metric["message"], metric["metric"], metric["outcome"]) == (
        "metric",
        "Receipts",
        "passed",
    )


def test_the_terminal_shows_no_metric_and_no_dulwich_info(
    package: logging.Logger, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    root = logging.getLogger()
    level, dulwich = root.level, logging.getLogger("dulwich").level
    observability.log_to_files(tmp_path)  # as serve does: the JSON goes to files
    handler = observability.log_to_terminal()
    try:
        observability.count("Receipts", outcome="passed")
        logging.getLogger("dulwich.server").info("capabilities: %s", "multi_ack side-band-64k")
        logging.getLogger("forkhorse.serve").info("listening")
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
        logging.getLogger("dulwich").setLevel(dulwich)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].endswith(" INFO forkhorse.serve listening")
    assert all(line.strip() for line in lines)
