"""ReceiptRun step `full_start` (see forkhorse.runner.workflow.steps.full_start)."""

from forkhorse.runner.workflow import steps
from forkhorse.wiring.handlers import trusted_step

handler = trusted_step(steps.full_start)
