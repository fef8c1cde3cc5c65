"""Application use cases: what owners and agents do, with every authority check.

The API turns HTTP into calls here; `serve`, the demo and the Lambda handlers wire the
ports. Nothing here knows about HTTP except the status each `ServiceError` carries.
"""

from forkhorse.service.errors import ServiceError
from forkhorse.service.facade import Service, ServiceSettings

__all__ = ["Service", "ServiceError", "ServiceSettings"]
