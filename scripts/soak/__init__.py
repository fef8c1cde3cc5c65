"""`make soak`: mixed traffic against a real `forkhorse serve` with kills and restarts,
leak sampling, and a verdict (see run.py)."""
