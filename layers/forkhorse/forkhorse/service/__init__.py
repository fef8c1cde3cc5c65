"""Application use cases: what owners and agents do, with every authority check.

The API turns HTTP into calls here; `serve`, the demo and the Lambda handlers wire the
ports. Nothing here knows about HTTP except the status each `ServiceError` carries.

The package imports nothing itself: `Service` is in `facade`, `ServiceError` in `errors`,
so a client that needs only the wire shapes (`responses`) does not load the service.
"""
