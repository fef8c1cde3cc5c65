"""PromoteRun step `verify` (see forkhorse.runner.promote_steps.promote_verify)."""

from forkhorse.runner import promote_steps
from forkhorse.wiring.handlers import promote_step

handler = promote_step(promote_steps.promote_verify)
