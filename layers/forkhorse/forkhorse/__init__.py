"""Forkhorse: receipt-gated review for coding agents."""

__version__ = "0.1.0"
