"""ReceiptRun step `full_poll` (see forkhorse.runner.workflow.steps.full_poll)."""

from forkhorse.runner.workflow import steps
from forkhorse.wiring.handlers import trusted_step

handler = trusted_step(steps.full_poll)
