"""Upkeep: interrupted executions recovered, stale exports and unreachable packs removed."""
