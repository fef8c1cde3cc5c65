"""PromoteRun step `start_run` (see forkhorse.runner.promote_steps.promote_start_run)."""

from forkhorse.runner import promote_steps
from forkhorse.wiring.handlers import promote_step

handler = promote_step(promote_steps.promote_start_run)
