"""Git smart HTTP for `/git/{project}/canonical.git` and `/git/{project}/forks/{fork}.git`.

Served by dulwich's WSGI support. Authentication is HTTP Basic with any user name and a
Forkhorse token as the password. Token resolution and repository facts are injected, so
the API wires them to the Store. Access follows `forkhorse.domain.git_access`; a refusal
is answered before any request body is read, so it leaves the repository unchanged.
Only the smart protocol is served (the dumb protocol would bypass the advertised-refs
check on a project's shared object store). After each successful push to a fork, one
`forkhorse.push` event per updated ref goes to the EventBus.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol
from urllib.parse import parse_qs

from dulwich.errors import HookError
from dulwich.file import FileLocked
from dulwich.hooks import Hook
from dulwich.objects import ObjectID
from dulwich.refs import Ref, RefsContainer, check_ref_format
from dulwich.server import Backend
from dulwich.web import GunzipFilter, HTTPGitApplication, LimitedInputFilter

from forkhorse.adapters.git.store import ZERO_SHA, DulwichGitStore, RepoNotFound, ServedRepo
from forkhorse.domain.git_access import (
    AccessDecision,
    GitOperation,
    GitPrincipal,
    RepoFacts,
    decide_git_access,
    is_valid_repo_name,
)
from forkhorse.ports.events import PUSH_EVENT, EventBus

MAX_REQUEST_BYTES = 50 * 1024 * 1024
TokenResolver = Callable[[str], GitPrincipal | None]
RepoLookup = Callable[[str, str | None], RepoFacts | None]
WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]

_ROUTE = re.compile(
    r"/git/(?P<project>[^/]+)/(?:canonical|forks/(?P<fork>[^/]+))\.git"
    r"(?P<service>/info/refs|/git-upload-pack|/git-receive-pack)"
)
_PUSH_SERVICE = "git-receive-pack"
_COMMIT = 1
_TAG = 4


class GitStores(Protocol):
    def store(self, project: str) -> DulwichGitStore: ...


@dataclass(frozen=True)
class _Route:
    project: str
    fork: str | None
    service_path: str
    operation: GitOperation


class GitHttpApp:
    """The WSGI application; one instance serves every project of a GitStores host."""

    def __init__(
        self,
        stores: GitStores,
        resolve_token: TokenResolver,
        lookup: RepoLookup,
        events: EventBus,
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        max_request_bytes: int = MAX_REQUEST_BYTES,
    ) -> None:
        self._stores = stores
        self._resolve_token = resolve_token
        self._lookup = lookup
        self._events = events
        self._clock = clock
        self._max_request_bytes = max_request_bytes

    def __call__(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        route = _parse_route(environ)
        if route is None:
            return _plain(start_response, 404, "Not found.")
        if route.service_path == "/info/refs" and not _query_service(environ):
            return _plain(start_response, 403, "Only the git smart HTTP protocol is served.")
        principal = self._principal(environ)
        decision, store = self._decide(route, principal)
        if not decision.allowed or store is None or principal is None:
            return _plain(start_response, decision.status, decision.message)
        return self._serve(environ, start_response, route, store, principal)

    def _principal(self, environ: dict[str, Any]) -> GitPrincipal | None:
        token = _basic_password(environ.get("HTTP_AUTHORIZATION", ""))
        return self._resolve_token(token) if token else None

    def _decide(
        self, route: _Route, principal: GitPrincipal | None
    ) -> tuple[AccessDecision, DulwichGitStore | None]:
        names_valid = is_valid_repo_name(route.project) and (
            route.fork is None or is_valid_repo_name(route.fork)
        )
        facts = self._lookup(route.project, route.fork) if principal and names_valid else None
        store = self._stores.store(route.project) if facts is not None else None
        if store is not None and not (store.exists(None) and store.exists(route.fork)):
            facts, store = None, None
        has_commits = bool(store.refs(None)) if store is not None else False
        decision = decide_git_access(
            principal,
            facts,
            fork=route.fork,
            operation=route.operation,
            canonical_has_commits=has_commits,
        )
        return decision, store

    def _serve(
        self,
        environ: dict[str, Any],
        start_response: Callable[..., Any],
        route: _Route,
        store: DulwichGitStore,
        principal: GitPrincipal,
    ) -> Iterable[bytes]:
        try:
            repo = store.served_repo(route.fork)
        except RepoNotFound:
            return _plain(start_response, 404, "Repository not found.")
        refs = _PushRefs(repo.refs)
        repo.refs = refs
        repo.hooks["update"] = _UpdatePolicy(repo, import_only=route.fork is None)
        app = LimitedInputFilter(
            GunzipFilter(HTTPGitApplication(_OneRepoBackend(repo))), self._max_request_bytes
        )
        environ = {**environ, "PATH_INFO": route.service_path}
        body = app(environ, start_response)
        if route.fork is None or route.operation != "push":
            return body
        return self._then_publish(body, route, principal, refs)

    def _then_publish(
        self, body: Iterable[bytes], route: _Route, principal: GitPrincipal, refs: _PushRefs
    ) -> Iterator[bytes]:
        yield from body
        at = self._clock().astimezone(UTC).isoformat().replace("+00:00", "Z")
        for update in refs.updates:
            self._events.publish(
                PUSH_EVENT,
                {
                    "project": route.project,
                    "fork": route.fork,
                    "ref": update.ref,
                    "old": update.old,
                    "new": update.new,
                    "pusher": principal.id,
                    "at": at,
                },
            )


def _parse_route(environ: dict[str, Any]) -> _Route | None:
    match = _ROUTE.fullmatch(environ.get("PATH_INFO", ""))
    method = environ.get("REQUEST_METHOD", "")
    if match is None:
        return None
    service_path = match["service"]
    if (service_path == "/info/refs") != (method == "GET"):
        return None
    push = service_path == f"/{_PUSH_SERVICE}" or _query_service(environ) == _PUSH_SERVICE
    return _Route(match["project"], match["fork"], service_path, "push" if push else "read")


def _query_service(environ: dict[str, Any]) -> str | None:
    values = parse_qs(environ.get("QUERY_STRING", "")).get("service")
    return values[0] if values else None


def _basic_password(header: str) -> str | None:
    scheme, _, encoded = header.partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    _, separator, password = decoded.partition(":")
    return password if separator and password else None


def _plain(start_response: Callable[..., Any], status: int, message: str) -> list[bytes]:
    reasons = {401: "Unauthorized", 403: "Forbidden", 404: "Not Found"}
    headers = [("Content-Type", "text/plain; charset=utf-8"), ("Cache-Control", "no-cache")]
    if status == 401:
        headers.append(("WWW-Authenticate", 'Basic realm="Forkhorse", charset="UTF-8"'))
    start_response(f"{status} {reasons.get(status, 'Error')}", headers)
    return [message.encode("utf-8") + b"\n"]


class _OneRepoBackend(Backend):
    def __init__(self, repo: ServedRepo) -> None:
        self._repo = repo

    def open_repository(self, path: str) -> Any:
        return self._repo


@dataclass(frozen=True)
class RefUpdate:
    ref: str
    old: str | None
    new: str | None


class _StaleRef(OSError):
    """Another writer changed the ref first; dulwich reports the ref as failed."""


class _PushRefs(RefsContainer):
    """Delegates to the store's refs; a lost compare-and-set fails the ref, and successes
    are recorded for push events (dulwich itself ignores a False from set_if_equals)."""

    def __init__(self, inner: RefsContainer) -> None:
        super().__init__()
        self._inner = inner
        self.updates: list[RefUpdate] = []

    def allkeys(self) -> set[Ref]:
        return self._inner.allkeys()

    def read_loose_ref(self, name: Ref) -> bytes | None:
        return self._inner.read_loose_ref(name)

    def get_packed_refs(self) -> dict[Ref, ObjectID]:
        return self._inner.get_packed_refs()

    def get_peeled(self, name: Ref) -> ObjectID | None:
        return self._inner.get_peeled(name)

    def get_symrefs(self) -> dict[Ref, Ref]:
        return self._inner.get_symrefs()

    def set_if_equals(
        self, name: Ref, old_ref: ObjectID | None, new_ref: ObjectID, *args: Any, **kwargs: Any
    ) -> bool:
        expected = old_ref if old_ref is not None else ZERO_SHA  # never unconditional
        try:
            written = self._inner.set_if_equals(name, expected, new_ref)
        except FileLocked as locked:
            raise _StaleRef("The ref is being changed by another push.") from locked
        if not written:
            raise _StaleRef("The ref changed during the push.")
        self._record(name, expected, new_ref)
        return True

    def add_if_new(self, name: Ref, ref: ObjectID, *args: Any, **kwargs: Any) -> bool:
        return self.set_if_equals(name, ZERO_SHA, ref)

    def remove_if_equals(
        self, name: Ref, old_ref: ObjectID | None, *args: Any, **kwargs: Any
    ) -> bool:
        if old_ref is None or old_ref == ZERO_SHA:
            raise _StaleRef("A deletion must name the ref's current value.")
        try:
            removed = self._inner.remove_if_equals(name, old_ref)
        except FileLocked as locked:
            raise _StaleRef("The ref is being changed by another push.") from locked
        if not removed:
            raise _StaleRef("The ref changed during the push.")
        self._record(name, old_ref, ZERO_SHA)
        return True

    def set_symbolic_ref(self, name: Ref, other: Ref, *args: Any, **kwargs: Any) -> None:
        raise PermissionError("Pushes cannot change symbolic refs.")

    def _record(self, name: Ref, old: bytes, new: bytes) -> None:
        self.updates.append(RefUpdate(name.decode("utf-8"), _sha_or_none(old), _sha_or_none(new)))


def _sha_or_none(value: bytes) -> str | None:
    return None if value == ZERO_SHA else value.decode("ascii")


class _UpdatePolicy(Hook):
    """Per-ref rules applied before dulwich writes a ref; a HookError refuses that ref."""

    def __init__(self, repo: ServedRepo, *, import_only: bool) -> None:
        self._repo = repo
        self._import_only = import_only

    def execute(self, *args: Any) -> tuple[bytes, bytes]:
        ref, old, new = args
        if not ref.startswith((b"refs/heads/", b"refs/tags/")) or not check_ref_format(ref):
            raise HookError("Forkhorse accepts only branch and tag refs.")
        if self._import_only and old != ZERO_SHA:
            raise HookError("Canonical accepts only new refs during its initial import.")
        if new != ZERO_SHA and not self._names_commit_or_tag(new):
            raise HookError("The pushed ref names an object that is missing.")
        return b"", b""  # dulwich relays (stdout, stderr) to the client

    def _names_commit_or_tag(self, sha: ObjectID) -> bool:
        try:
            type_num, _ = self._repo.object_store.get_raw(sha)
        except KeyError:
            return False
        return type_num in (_COMMIT, _TAG)
