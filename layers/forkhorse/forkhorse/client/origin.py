"""Where the client may send its token: the configured service's exact origin, and only there.

An origin is a scheme (http or https), a host and a port, the default ports made explicit
(http 80, https 443), so `https://h` and `https://h:443` are one origin and `https://h:8443`
another. Plain http is allowed only to a loopback host (127.0.0.0/8, ::1, `localhost`): a
token sent in clear to any other host is readable on the way. Every place that sends the
token (the HTTP client, the git push and the git credential helper) asks this module, and a
URL from the service's answers (a fork's `cloneUrl`, a redirect's `Location`) is compared with
the configured service, never trusted as a new one.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from typing import NamedTuple
from urllib.parse import urlsplit

from forkhorse.client.errors import UsageError

DEFAULT_PORTS = {"http": 80, "https": 443}
LOOPBACK_NAMES = frozenset({"localhost"})
_LOOPBACK_V4 = ipaddress.IPv4Network("127.0.0.0/8")
_LOOPBACK_V6 = ipaddress.IPv6Address("::1")
# A host name as the client accepts it: ASCII letters, digits, dots and hyphens (IP
# addresses are parsed apart). Anything else (user info, spaces, Unicode) is refused.
_HOST_NAME = re.compile(r"[a-z0-9](?:[a-z0-9.-]{0,252})")
# What git's credential protocol may put in `host`: a name or an address, and a port.
_CREDENTIAL_HOST = re.compile(r"[A-Za-z0-9.\-]+(?::[0-9]{1,5})?|\[[0-9A-Fa-f:.]+\](?::[0-9]{1,5})?")


class OriginError(UsageError):
    """A URL the client will not send its token to (exit code 3)."""


class Origin(NamedTuple):  # (not a dataclass: `dataclasses` costs every command's start-up)
    scheme: str
    host: str  # lower case; an IP address in its canonical form, without brackets
    port: int

    @property
    def loopback(self) -> bool:
        return is_loopback(self.host)

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 or `localhost`; nothing else (not even another name for them)."""
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv4Address):
        return address in _LOOPBACK_V4
    return address == _LOOPBACK_V6


def _host(raw: str | None, url: str) -> str:
    if not raw:
        raise OriginError(f"{_shown(url)} names no host.")
    try:
        return ipaddress.ip_address(raw).compressed
    except ValueError:
        pass
    if not _HOST_NAME.fullmatch(raw):
        raise OriginError(f"{_shown(url)} does not name a plain host.")
    return raw


def _shown(url: str) -> str:
    """The URL as an error may show it: printable, bounded, without any user info."""
    parts = urlsplit(url) if url.isprintable() else None
    if parts is not None and "@" in parts.netloc:
        url = url.replace(parts.netloc, parts.netloc.rsplit("@", 1)[1], 1)
    text = "".join(c if c.isprintable() else "?" for c in url)
    return repr(text[:200])


def origin_of(url: str) -> Origin:
    """The origin of an http(s) URL; `OriginError` for anything else (another scheme, no
    host, user info in the URL, a bad port)."""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS:
        raise OriginError(f"{_shown(url)} is not an http or https URL.")
    if "@" in parts.netloc:
        raise OriginError(f"{_shown(url)} carries user info; the token goes in no URL.")
    try:
        port = parts.port
    except ValueError:
        raise OriginError(f"{_shown(url)} has an invalid port.") from None
    host = _host(parts.hostname, url)
    return Origin(scheme, host, DEFAULT_PORTS[scheme] if port is None else port)


def service_origin(url: str) -> Origin:
    """The configured service's origin, refusing plain http to a host other than loopback
    (the token would cross the network in clear)."""
    found = origin_of(url)
    if found.scheme == "http" and not found.loopback:
        raise OriginError(
            f"Refusing the service URL {_shown(url)}: plain http sends the token in clear, "
            "so it is allowed only to a loopback host (127.0.0.0/8, ::1, localhost); "
            "use https."
        )
    return found


def same_origin(url: str, service_url: str) -> bool:
    """Whether `url` is on the configured service's origin (False for any URL that is not
    an http(s) URL the client accepts)."""
    try:
        return origin_of(url) == service_origin(service_url)
    except OriginError:
        return False


def require_service_origin(url: str, service_url: str, what: str) -> None:
    """Refuse (`OriginError`) to send the token to `url` unless it is on the service's
    origin. `what` names the URL's source in the message (for example "the fork's cloneUrl")."""
    service = service_origin(service_url)
    try:
        found: Origin | str = origin_of(url)
    except OriginError:
        found = _shown(url)
    if found != service:
        raise OriginError(
            f"Refusing to send the token: {what} is on {found}, another origin than the "
            f"configured service ({service}). The service's answer names a host the client "
            "does not trust; check the service URL."
        )


def credential_origin(fields: Mapping[str, str]) -> Origin | None:
    """The origin git asks a credential for (`protocol` and `host`, or `url`), or None when
    the request names none or names it in a way git would not."""
    asked: list[Origin] = []
    protocol, host = fields.get("protocol"), fields.get("host")
    if protocol is not None or host is not None:
        if not protocol or not host or not _CREDENTIAL_HOST.fullmatch(host):
            return None
        try:
            asked.append(origin_of(f"{protocol}://{host}/"))
        except OriginError:
            return None
    if "url" in fields:
        try:
            asked.append(origin_of(fields["url"]))
        except OriginError:
            return None
    if not asked or any(found != asked[0] for found in asked):
        return None
    return asked[0]
