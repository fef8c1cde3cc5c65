"""Local mode's stand-in for Step Functions: it follows the same ASL, step for step."""
