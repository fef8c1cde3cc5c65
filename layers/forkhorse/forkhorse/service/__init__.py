"""Application use cases: what owners and agents do, with every authority check.

The API turns HTTP into calls here; `serve`, the demo and the Lambda handlers wire the
ports. Nothing here knows about HTTP: a refusal says its kind (`errors`), and the API maps
kinds to statuses. Promote lives in `promote` (request, rules, workflow steps, VSA).

The package imports nothing itself: `Service` is in `facade`, `ServiceError` in `errors`.
The wire bodies are `forkhorse.responses`, outside it, so the client never loads it.
"""
