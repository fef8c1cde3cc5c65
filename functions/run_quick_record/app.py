"""ReceiptRun step `quick_record` (see forkhorse.runner.workflow.steps.quick_record)."""

from forkhorse.runner.workflow import steps
from forkhorse.wiring.handlers import trusted_step

handler = trusted_step(steps.quick_record)
