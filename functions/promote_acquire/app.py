"""PromoteRun step `acquire` (see forkhorse.runner.promote_steps.promote_acquire)."""

from forkhorse.runner import promote_steps
from forkhorse.wiring.handlers import promote_step

handler = promote_step(promote_steps.promote_acquire)
