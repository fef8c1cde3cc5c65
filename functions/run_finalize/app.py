"""ReceiptRun step `finalize` (see forkhorse.runner.steps.finalize)."""

from forkhorse.runner import steps
from forkhorse.wiring.handlers import trusted_step

handler = trusted_step(steps.finalize)
