"""ReceiptRun step `prepare` (see forkhorse.runner.steps.prepare)."""

from forkhorse.runner import steps
from forkhorse.wiring.handlers import trusted_step

handler = trusted_step(steps.prepare)
