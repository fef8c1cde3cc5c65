"""Flow-Next review receipts: envelopes, structured findings v1, currentness, history, criteria,
green receipts, QA receipts and a pure classification for the service.

Only `history` touches files; `cli` adds git and process access for the gate commands.
"""
