"""ReceiptRun's FullStart: starts the check's task and holds the state's task token (see
forkhorse.runner.workflow.callbacks.full_launch)."""

from forkhorse.runner.workflow import callbacks
from forkhorse.wiring.handlers import callback_step

handler = callback_step(callbacks.full_launch)
