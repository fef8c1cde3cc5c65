"""ReceiptRun's FullOvertime: FullStart's wait timed out; the check is ended and recorded
(see forkhorse.runner.workflow.callbacks.full_overtime)."""

from forkhorse.runner.workflow import callbacks
from forkhorse.wiring.handlers import callback_step

handler = callback_step(callbacks.full_overtime)
