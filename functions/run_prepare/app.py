"""ReceiptRun step `prepare` (see forkhorse.runner.workflow.steps.prepare)."""

from forkhorse.runner.workflow import steps
from forkhorse.wiring.handlers import trusted_step

handler = trusted_step(steps.prepare)
