"""PromoteRun step `write` (see forkhorse.service.promote.steps.promote_write)."""

from forkhorse.service.promote import steps as promote_steps
from forkhorse.wiring.handlers import promote_step

handler = promote_step(promote_steps.promote_write)
