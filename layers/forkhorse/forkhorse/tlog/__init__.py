"""The transparency log as any verifier reads it: signed notes, checkpoints and proofs
from tiles. The client, verify-log and the service share it; it loads nothing of the service."""
