"""Signed, verifiable evidence: receipts as in-toto statements, promotions as SLSA
verification summaries, each in a DSSE envelope that anyone can verify offline."""
