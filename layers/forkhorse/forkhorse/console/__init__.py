"""The owner console: static HTML, CSS and JavaScript modules, served by the API.

`/` is the page and `/console/<file>` its files, locally and behind API Gateway alike;
`/favicon.ico`, which browsers ask for unprompted, is the mark (public, never a 401).
`/console/config.json` tells the page how owners sign in: with the local owner token, or
through the Cognito hosted UI (authorization code with PKCE) when the deployment names a
Cognito domain and app client.
"""

from __future__ import annotations

from importlib import resources
from pathlib import PurePosixPath
from typing import Any, Final

PREFIX: Final = "/console/"
CONFIG_PATH: Final = "/console/config.json"
INDEX: Final = "index.html"
FAVICON_PATH: Final = "/favicon.ico"
FAVICON: Final = "favicon.svg"
MEDIA_TYPES: Final = {
    ".html": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".svg": "image/svg+xml",
}
# The page loads only its own files; it talks only to this API and, on AWS, to Cognito.
CONTENT_SECURITY_POLICY: Final = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self' https://*.amazoncognito.com; form-action 'self'; "
    "base-uri 'none'; frame-ancestors 'none'"
)
HEADERS: Final = {
    "Cache-Control": "no-cache",
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}


def _file_name(path: str) -> str | None:
    if path in ("", "/"):
        return INDEX
    if path == FAVICON_PATH:
        return FAVICON
    if not path.startswith(PREFIX):
        return None
    name = path[len(PREFIX) :]
    if not name or "/" in name or name.startswith("."):
        return None
    return name if PurePosixPath(name).suffix in MEDIA_TYPES else None


def asset(path: str) -> tuple[bytes, str] | None:
    """The bytes and media type of the console file at a request path, if there is one."""
    name = _file_name(path)
    if name is None:
        return None
    resource = resources.files(__name__).joinpath(name)
    if not resource.is_file():
        return None
    return resource.read_bytes(), MEDIA_TYPES[PurePosixPath(name).suffix]


def config(cognito_domain: str = "", client_id: str = "") -> dict[str, Any]:
    """How owners sign in here: Cognito's hosted UI when the deployment names both, else the
    owner token. Only public values: a Cognito app client has no secret."""
    domain = cognito_domain.rstrip("/")
    if domain and client_id:
        return {
            "auth": "cognito",
            "cognito": {"domain": domain, "clientId": client_id, "scopes": ["openid", "email"]},
        }
    return {"auth": "token"}
