"""Where the client finds the service and its token: flags, then the environment, then a
profile in `~/.config/forkhorse/config.toml` (written by `forkhorse login`).

The token is never taken from argv (only from a file, the environment or the profile), and
`ClientConfig`'s repr hides it, so it cannot reach logs or tracebacks by accident. The
token goes only to the configured service's origin (`forkhorse.client.origin`).
"""

from __future__ import annotations

import os
from pathlib import Path

from forkhorse.client.errors import UsageError
from forkhorse.client.origin import service_origin

URL_VARIABLE = "FORKHORSE_URL"
TOKEN_VARIABLE = "FORKHORSE_TOKEN"  # noqa: S105 (a variable name, not a secret)
PROFILE_VARIABLE = "FORKHORSE_PROFILE"
PROJECT_VARIABLE = "FORKHORSE_PROJECT"
WITNESS_STATE_VARIABLE = "FORKHORSE_WITNESS_STATE"
DEFAULT_PROFILE = "default"
# A token is one line; anything longer is not a token file.
MAX_TOKEN_BYTES = 4096


class ClientConfig:
    """The service and the token. The URL must be http(s) with no user info, and plain http
    only to a loopback host (`origin.service_origin`): a configuration that would send the
    token in clear is refused here, before any request. Immutable, and its repr never shows
    the token. (A plain class: `dataclasses` would cost every command, git's credential
    helper included, a tenth of its start-up.)"""

    __slots__ = ("project", "token", "url")
    url: str
    token: str
    project: str | None

    def __init__(self, url: str, token: str, project: str | None = None) -> None:
        service_origin(url)
        object.__setattr__(self, "url", url)
        object.__setattr__(self, "token", token)
        object.__setattr__(self, "project", project)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"ClientConfig is immutable: cannot set {name}")

    def _key(self) -> tuple[str, str, str | None]:
        return self.url, self.token, self.project

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ClientConfig) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"ClientConfig(url={self.url!r}, project={self.project!r})"


def config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "forkhorse" / "config.toml"


def witness_path() -> Path:
    """Where the witness keeps each server's pinned log key and newest verified checkpoint:
    beside the profiles, unless FORKHORSE_WITNESS_STATE names another file."""
    chosen = os.environ.get(WITNESS_STATE_VARIABLE)
    return Path(chosen) if chosen else config_path().parent / "witness.json"


def read_token_file(path: Path) -> str:
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_TOKEN_BYTES + 1)
    except OSError as exc:
        raise UsageError(f"Cannot read the token file {path}: {exc.strerror}.") from None
    token = raw.decode("utf-8", errors="replace").strip()
    if not token or len(raw) > MAX_TOKEN_BYTES or "\n" in token:
        raise UsageError(f"The token file {path} does not hold one token.")
    return token


def _profiles(path: Path) -> dict[str, dict[str, str]]:
    if not path.exists():
        return {}
    import tomllib  # only with a profile: `--help` and a configured environment skip it

    try:
        loaded = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"Cannot read {path}: {exc}.") from None
    profiles = loaded.get("profiles", {})
    if not isinstance(profiles, dict):
        raise UsageError(f"{path}: `profiles` must be a table.")
    return {
        str(name): {str(k): str(v) for k, v in values.items()}
        for name, values in profiles.items()
        if isinstance(values, dict)
    }


def resolve(
    url: str | None = None,
    token_file: Path | None = None,
    profile: str | None = None,
    project: str | None = None,
) -> ClientConfig:
    """Each setting from the first place that has it: flag, environment, profile."""
    stored = _stored(profile)
    token = (
        read_token_file(token_file)
        if token_file is not None
        else os.environ.get(TOKEN_VARIABLE) or stored.get("token")
    )
    found_url, chosen = _url_and_project(stored, url, project)
    if not found_url:
        raise UsageError(
            f"No service URL: pass --url, set {URL_VARIABLE} or run `forkhorse login`."
        )
    if not token:
        raise UsageError(
            f"No token: pass --token-file, set {TOKEN_VARIABLE} or run `forkhorse login`."
        )
    return ClientConfig(found_url, token, chosen)


def configured(
    url: str | None = None, profile: str | None = None, project: str | None = None
) -> tuple[str | None, str | None]:
    """The service URL and project as `resolve` finds them, for commands that need no
    token (`verify-log`, `witness`); None where none is configured."""
    return _url_and_project(_stored(profile), url, project)


def _stored(profile: str | None) -> dict[str, str]:
    name = profile or os.environ.get(PROFILE_VARIABLE) or DEFAULT_PROFILE
    return _profiles(config_path()).get(name, {})


def _url_and_project(
    stored: dict[str, str], url: str | None, project: str | None
) -> tuple[str | None, str | None]:
    found = url or os.environ.get(URL_VARIABLE) or stored.get("url")
    chosen = project or os.environ.get(PROJECT_VARIABLE) or stored.get("project")
    return (found.rstrip("/") if found else None), chosen


def _toml_string(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def save_profile(name: str, config: ClientConfig) -> Path:
    """Write (or replace) one profile, keeping the others; the file is private (0600)."""
    path = config_path()
    profiles = _profiles(path)
    entry = {"url": config.url, "token": config.token}
    if config.project:
        entry["project"] = config.project
    profiles[name] = entry
    lines: list[str] = []
    for profile, values in sorted(profiles.items()):
        lines.append(f"[profiles.{_toml_string(profile)}]")
        lines.extend(f"{key} = {_toml_string(value)}" for key, value in sorted(values.items()))
        lines.append("")
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    descriptor = os.open(path.with_suffix(".tmp"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write("\n".join(lines))
    os.replace(path.with_suffix(".tmp"), path)
    return path
