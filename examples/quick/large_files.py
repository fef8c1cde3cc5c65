"""An example of the `stat` API for SMALL snapshots, in Python (the repository keeps its
JavaScript twin, .forkhorse/quick/large-files.js, unregistered too).

It fails on any regular file of 10,000,000 bytes or more without reading file contents.
Serial stat calls over a whole repository can exceed the quick tier's 10-second deadline
and its budgets, so the repository runs the `large-files` full check instead.
"""

LIMIT_BYTES = 10_000_000


def check(ctx):
    large = []
    for path in ctx.list(""):
        stat = ctx.stat(path)
        if stat is not None and stat["size"] >= LIMIT_BYTES:
            large.append(path)
    if large:
        return {"ok": False, "message": "Files of 10 MB or more: " + ", ".join(large[:20]) + "."}
    return {"ok": True, "message": "No file is 10 MB or larger."}
