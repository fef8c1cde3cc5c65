"""ReceiptRun step `finalize` (see forkhorse.runner.workflow.steps.finalize)."""

from forkhorse.runner.workflow import steps
from forkhorse.wiring.handlers import trusted_step

handler = trusted_step(steps.finalize)
