"""Git smart HTTP for `/git/{project}/canonical.git` and `/git/{project}/forks/{fork}.git`.

Routing, authentication and access come first: HTTP Basic with any user name and a
Forkhorse token as the password; token resolution and repository facts are injected, so
the API wires them to the Store. Access follows `forkhorse.domain.git_access`; a refusal
is answered before any request body is read, so it leaves the repository unchanged.
Only the smart protocol is served (the dumb protocol would bypass the advertised-refs
check on a project's shared object store).

Then dulwich's handlers run over `wire.RequestBody` (decompressed and bounded while it
streams) and a response that starts with its first byte: a malformed request (bad
pkt-line, empty or badly gzipped body, unadvertised `want`, wrong content type, unknown
service) or one over `GitLimits.request_bytes` gets its 4xx and git's own `ERR` line,
never a 500. Upload-pack serves only what the caller may read (`upload.py`). After each
successful push to a fork, one `forkhorse.push` event per updated ref goes to the EventBus.

An authorized request then takes a slot of `GitAdmission` (at most `GIT_CONCURRENCY` git
requests at once, per project and in all) or is answered 503 with `Retry-After`, so git
traffic never takes every thread of the server that also answers the API.
"""

from __future__ import annotations

import base64
import binascii
import functools
import logging
import re
from collections.abc import Callable, Iterable, Iterator
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, BinaryIO, Protocol, cast
from urllib.parse import parse_qs

from dulwich.errors import GitProtocolError, HookError
from dulwich.file import FileLocked
from dulwich.hooks import Hook
from dulwich.objects import ObjectID, valid_hexsha
from dulwich.protocol import (
    CAPABILITY_SIDE_BAND_64K,
    SIDE_BAND_CHANNEL_PROGRESS,
    ReceivableProtocol,
)
from dulwich.refs import Ref, RefsContainer
from dulwich.server import Backend, Handler, ReceivePackHandler

from forkhorse.adapters.git.ingest.refnames import ref_name_problem
from forkhorse.adapters.git.store import ZERO_SHA, DulwichGitStore, RepoNotFound, ServedRepo
from forkhorse.domain.git_access import (
    AccessDecision,
    GitOperation,
    GitPrincipal,
    RepoFacts,
    decide_git_access,
    is_valid_repo_name,
)
from forkhorse.domain.limits import GIT, GIT_WALKS
from forkhorse.githttp import protocol_v2
from forkhorse.githttp.admission import GitAdmission
from forkhorse.githttp.filters import all_reachable, parse_filter
from forkhorse.githttp.upload import (
    BoundedUploadPack,
    RequestFacts,
    VisibleHistory,
    checked_request,
)
from forkhorse.githttp.wire import DeferredResponse, Refused, RequestBody, git_error, plain
from forkhorse.ports.events import PUSH_EVENT, EventBus
from forkhorse.ports.git import DEFAULT_BRANCH

log = logging.getLogger(__name__)

MAX_REQUEST_BYTES = GIT.request_bytes
TokenResolver = Callable[[str], GitPrincipal | None]
RepoLookup = Callable[[str, str | None], RepoFacts | None]
WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]

_ROUTE = re.compile(
    r"/git/(?P<project>[^/]+)/(?:canonical|forks/(?P<fork>[^/]+))\.git"
    r"(?P<service>/info/refs|/git-upload-pack|/git-receive-pack)"
)
_PUSH_SERVICE = "git-receive-pack"
_UPLOAD_SERVICE = "git-upload-pack"
_COMMIT = 1
_TAG = 4


class GitStores(Protocol):
    def store(self, project: str) -> DulwichGitStore: ...


@dataclass(frozen=True)
class _Route:
    project: str
    fork: str | None
    service: str  # git-upload-pack or git-receive-pack
    advertise: bool  # GET info/refs rather than the POST of the service itself

    @property
    def operation(self) -> GitOperation:
        return "push" if self.service == _PUSH_SERVICE else "read"


@dataclass(frozen=True)
class _Request:
    route: _Route
    store: DulwichGitStore
    repo: ServedRepo
    principal: GitPrincipal
    start_response: Callable[..., Any]
    version: int = 0  # git's wire protocol: 2 for a fetch that asks for it (protocol_v2.py)


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
        max_request_bytes: int = GIT.request_bytes,
        clone_inflated_bytes: int = GIT.clone_inflated_bytes,
        admission: GitAdmission | None = None,
        import_log: ImportLog | None = None,
    ) -> None:
        self._stores = stores
        self._import_log = import_log
        self._resolve_token = resolve_token
        self._lookup = lookup
        self._events = events
        self._clock = clock
        self._max_request_bytes = max_request_bytes
        self._clone_inflated_bytes = clone_inflated_bytes
        self._admission = admission or GitAdmission()

    def __call__(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        route = _parse_route(environ)
        if isinstance(route, Refused):
            return plain(start_response, route.status, route.message)
        principal = self._principal(environ)
        decision, store = self._decide(route, principal)
        if not decision.allowed or store is None or principal is None:
            return _refusal(start_response, route, decision.status, decision.message)
        with self._admission.admitted(route.project) as admitted:
            if not admitted:
                return _busy(start_response, route, self._admission.retry_after_seconds)
            return self._admitted(environ, start_response, route, store, principal)

    def _admitted(
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
            return _refusal(start_response, route, 404, "Repository not found.")
        version = 2 if route.operation == "read" and protocol_v2.requested(environ) else 0
        request = _Request(route, store, repo, principal, start_response, version)
        try:
            if route.advertise:
                return self._advertise(request)
            return self._serve(environ, request)
        finally:
            # The response is complete by now; the request's packs close here, not
            # whenever the garbage collector breaks the repo's reference cycles.
            repo.close()

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

    def _advertise(self, request: _Request) -> Iterable[bytes]:
        service = request.route.service
        response = DeferredResponse(
            request.start_response, f"application/x-{service}-advertisement"
        )
        if request.version == 2:
            protocol_v2.advertise(response.write)
            return []
        proto = ReceivableProtocol(_no_input, response.write)
        proto.write_pkt_line(f"# service={service}\n".encode("ascii"))
        proto.write_pkt_line(None)
        if request.route.operation == "read":
            handler: Handler = self._upload_handler(request.repo, proto, advertise=True)
        else:
            handler, _ = _receive_handler(request, proto, advertise=True)
        return self._run(handler, request, response)

    def _serve(self, environ: dict[str, Any], request: _Request) -> Iterable[bytes]:
        service = request.route.service
        if environ.get("CONTENT_TYPE") != f"application/x-{service}-request":
            message = f"A {service} request needs Content-Type application/x-{service}-request."
            return git_error(request.start_response, 415, service, message)
        response = DeferredResponse(request.start_response, f"application/x-{service}-result")
        with request.store.serving():
            try:
                body = RequestBody.from_environ(environ, self._max_request_bytes)
                body.require_content()
                if request.route.operation == "read":
                    return self._upload_pack(request, body, response)
            except Refused as refused:
                return git_error(request.start_response, refused.status, service, refused.message)
            answer = self._receive_pack(request, body, response)
        request.store.pushed()
        return answer

    def _upload_pack(
        self, request: _Request, body: RequestBody, response: DeferredResponse
    ) -> Iterable[bytes]:
        if request.version == 2:
            return self._upload_pack_v2(request, body, response)
        return self._fetch(request, body, response, response.write)

    def _upload_pack_v2(
        self, request: _Request, body: RequestBody, response: DeferredResponse
    ) -> Iterable[bytes]:
        """A version 2 command: `ls-refs` answered here, `fetch` as version 0's fetch."""
        command, arguments = protocol_v2.read_command(body.read)
        if command == b"ls-refs":
            protocol_v2.ls_refs(request.repo, arguments, response.write)
            return []
        fetch = protocol_v2.FetchRequest(arguments)
        with fetch.body:
            source = cast(BinaryIO, fetch.body)
            rewritten = RequestBody(source, None, False, self._max_request_bytes)
            output = protocol_v2.FetchResponse(response.write, done=fetch.done)
            return self._fetch(request, rewritten, response, output.write, output)

    def _fetch(
        self,
        request: _Request,
        body: RequestBody,
        response: DeferredResponse,
        write: Callable[[bytes], Any],
        v2: protocol_v2.FetchResponse | None = None,
    ) -> Iterable[bytes]:
        advertised = set(request.repo.get_refs().values())
        facts = RequestFacts(reachable=lambda wants: self._reachable(request, wants))
        with checked_request(body, advertised, self._visible(request), facts) as checked:
            proto = ReceivableProtocol(checked.read, write)
            handler: Handler = BoundedUploadPack(
                _OneRepoBackend(request.repo),
                ["/"],
                proto,
                send_limit=self._clone_inflated_bytes,
                stateless_rpc=True,
                object_filter=parse_filter(facts.filter),
                unadvertised=facts.unadvertised,
            )
            if v2 is not None:
                handler = protocol_v2.V2Fetch(handler, v2)
            return self._run(handler, request, response)

    def _reachable(self, request: _Request, wants: AbstractSet[bytes]) -> bool:
        """Whether wants that are no ref tip are reachable from what the caller may read:
        canonical's refs and the requested repository's (`filters.all_reachable`)."""
        canonical = [sha.encode("ascii") for sha in request.store.refs(None).values()]
        own = request.repo.get_refs().values()
        return all_reachable(request.repo.object_store, [*own, *canonical], wants)

    def _visible(self, request: _Request) -> VisibleHistory | None:
        """What an agent may read: canonical and the repository it asked for. The owner
        reads every fork, so nothing is hidden from it."""
        if request.principal.kind == "owner":
            return None
        canonical = [sha.encode("ascii") for sha in request.store.refs(None).values()]
        own = request.repo.get_refs().values()
        return VisibleHistory(request.repo.object_store, [*canonical, *own])

    def _upload_handler(
        self, repo: ServedRepo, proto: ReceivableProtocol, *, advertise: bool
    ) -> BoundedUploadPack:
        return BoundedUploadPack(
            _OneRepoBackend(repo),
            ["/"],
            proto,
            send_limit=self._clone_inflated_bytes,
            stateless_rpc=True,
            advertise_refs=advertise,
        )

    def _receive_pack(
        self, request: _Request, body: RequestBody, response: DeferredResponse
    ) -> Iterable[bytes]:
        proto = ReceivableProtocol(body.read, response.write)
        handler, refs = _receive_handler(request, proto, advertise=False, log=self._import_log)
        answer = self._run(handler, request, response)
        if request.route.fork is not None:
            self._publish(request, refs.updates)
        else:
            self._log_import(request, refs.updates)
        return answer

    def _run(self, handler: Handler, request: _Request, response: DeferredResponse) -> list[bytes]:
        """Run one dulwich handler; a refusal keeps its 4xx while nothing is sent yet, and
        ends a started response with git's side-band error (which the client prints)."""
        service = request.route.service
        try:
            handler.handle()
        except Refused as refused:
            return _refuse(request, response, refused.status, refused.message)
        except (GitProtocolError, ValueError) as malformed:
            message = f"{service[4:]}: the request does not follow git's protocol ({malformed})."
            return _refuse(request, response, 400, message)
        if not response.started:
            response.write(b"")  # git's answer to a request that asks for nothing is empty
        return []

    def _log_import(self, request: _Request, updates: list[RefUpdate]) -> None:
        """Canonical's import (its only push: later writes are promotions) into the log."""
        for update in updates:
            if self._import_log is not None and update.ref == DEFAULT_BRANCH and update.new:
                self._import_log.imported(request.route.project, update.new)

    def _publish(self, request: _Request, updates: list[RefUpdate]) -> None:
        at = self._clock().astimezone(UTC).isoformat().replace("+00:00", "Z")
        for update in updates:
            self._events.publish(
                PUSH_EVENT,
                {
                    "project": request.route.project,
                    "fork": request.route.fork,
                    "ref": update.ref,
                    "old": update.old,
                    "new": update.new,
                    "pusher": request.principal.id,
                    "at": at,
                },
            )


def _refuse(
    request: _Request, response: DeferredResponse, status: int, message: str
) -> list[bytes]:
    if not response.started:
        return git_error(request.start_response, status, request.route.service, message)
    log.info("ended a %s response: %s", request.route.service, message)
    response.fatal(message)
    return []


def _receive_handler(
    request: _Request,
    proto: ReceivableProtocol,
    *,
    advertise: bool,
    log: ImportLog | None = None,
) -> tuple[ReceivePackHandler, _PushRefs]:
    """dulwich's receive-pack over the push policy: compare-and-set refs and the update hook."""
    repo = request.repo
    refs = _PushRefs(repo.refs)
    repo.refs = refs
    importing = None
    if request.route.fork is None and log is not None:
        importing = functools.partial(log.intend_import, request.route.project)
    repo.hooks["update"] = _UpdatePolicy(repo, importing, import_only=request.route.fork is None)
    handler = _ReceivePack(
        _OneRepoBackend(repo), ["/"], proto, stateless_rpc=True, advertise_refs=advertise
    )
    return handler, refs


def _refusal(
    start_response: Callable[..., Any], route: _Route, status: int, message: str
) -> list[bytes]:
    """An access refusal. git prints the text of a refused GET (`remote: <why>`) but only
    the status of a refused POST, which therefore gets git's own error (`wire.git_error`);
    401 stays 401 either way, as git asks its credential helper only then."""
    if route.advertise or status == 401:
        return plain(start_response, status, message)
    return git_error(start_response, status, route.service, message)


BUSY = "The server is busy with other git requests; try again shortly."


def _busy(start_response: Callable[..., Any], route: _Route, retry_after: int) -> list[bytes]:
    """Every git slot is taken: come back later (nothing of the request was read). A POST
    gets git's own error, which git prints; both carry `Retry-After`."""

    def with_retry(status: str, headers: list[tuple[str, str]]) -> Any:
        return start_response(status, [*headers, ("Retry-After", str(retry_after))])

    if not route.advertise:
        return git_error(with_retry, 503, route.service, BUSY)
    start_response(
        "503 Service Unavailable",
        [
            ("Content-Type", "text/plain; charset=utf-8"),
            ("Cache-Control", "no-cache"),
            ("Retry-After", str(retry_after)),
        ],
    )
    return [BUSY.encode("ascii") + b"\n"]


def _no_input(size: int) -> bytes:
    return b""


def _parse_route(environ: dict[str, Any]) -> _Route | Refused:
    match = _ROUTE.fullmatch(environ.get("PATH_INFO", ""))
    method = environ.get("REQUEST_METHOD", "")
    if match is None:
        return Refused(404, "Not found.")
    advertise = match["service"] == "/info/refs"
    if advertise != (method == "GET"):
        return Refused(405 if advertise else 404, "Not found.")
    service = _query_service(environ) if advertise else match["service"][1:]
    if advertise and not service:
        return Refused(403, "Only the git smart HTTP protocol is served.")
    if service not in (_UPLOAD_SERVICE, _PUSH_SERVICE):
        return Refused(
            403, f"Unknown git service {service!r}: use git-upload-pack or git-receive-pack."
        )
    return _Route(match["project"], match["fork"], service, advertise)


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
        if ref_name_problem(name) is not None:
            raise _StaleRef("The ref name is not one Forkhorse writes.")
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


class _ReceivePack(ReceivePackHandler):
    """dulwich's receive-pack, reporting every ref as git does when the pack is refused
    (`ng <ref> unpacker error` after `unpack <reason>`), so the client prints the reason and
    each ref as rejected rather than unreported; the reason also goes to the side-band's
    progress channel, which git prints as `remote: <why>`.

    A push from a shallow clone starts with one `shallow <sha>` line per commit at its
    boundary (git sends them before its commands). They are read and set aside: the server
    holds the whole history, and the connectivity check (`adapters/git/ingest`) accepts a pushed
    commit whose parents the pusher may read, so no ref can end up shallow here."""

    def handle(self) -> None:
        if not self.advertise_refs:
            self._skip_shallow_lines()
        super().handle()

    def _skip_shallow_lines(self) -> None:
        for _ in range(GIT_WALKS.negotiation_commits + 1):
            line = self.proto.read_pkt_line()
            if line is None or not line.startswith(b"shallow "):
                self.proto.unread_pkt_line(line)
                return
            sha = line[len(b"shallow ") :].rstrip(b"\n")
            if len(sha) != 40 or not valid_hexsha(sha):
                raise GitProtocolError(f"Invalid shallow line from client: {line[:80]!r}")
        raise Refused(
            400,
            f"receive-pack: more than {GIT_WALKS.negotiation_commits} shallow lines; "
            "push from a deeper clone.",
        )

    def _apply_pack(
        self, refs: list[tuple[ObjectID, ObjectID, Ref]]
    ) -> Iterator[tuple[bytes, bytes]]:
        statuses = super()._apply_pack(refs)
        unpack = next(statuses)
        yield unpack
        if unpack[1] != b"ok":
            if self.has_capability(CAPABILITY_SIDE_BAND_64K):  # git prints `remote: <why>`
                self.proto.write_sideband(SIDE_BAND_CHANNEL_PROGRESS, unpack[1] + b"\n")
            for _, _, ref in refs:
                yield ref, b"unpacker error"
            return
        yield from statuses


class ImportLog(Protocol):
    """Where canonical's import is logged (`service.log_events.GateLog`)."""

    def intend_import(self, project: str, commit: str) -> None: ...

    def imported(self, project: str, commit: str) -> int | None: ...


class _UpdatePolicy(Hook):
    """Per-ref rules applied before dulwich writes a ref; a HookError refuses that ref and
    the client prints `! [remote rejected] <ref> (<reason>)`.

    The push session (`ingest.session.PushSession`) has already checked the pack; it judges the
    target: pushed or readable by the pusher, a commit for a branch (so a tag object is
    never a fork head), a commit or a tag for a tag ref.
    """

    def __init__(
        self, repo: ServedRepo, importing: Callable[[str], None] | None, *, import_only: bool
    ) -> None:
        self._repo = repo
        self._importing = importing  # notes the import's log intent before its ref is written
        self._import_only = import_only

    def execute(self, *args: Any) -> tuple[bytes, bytes]:
        ref, old, new = args
        problem = ref_name_problem(ref)
        if problem is not None:
            raise HookError(f"refused ref name {problem}")
        if self._import_only and old != ZERO_SHA:
            raise HookError("Canonical accepts only new refs during its initial import.")
        if new != ZERO_SHA:
            problem = self._repo.push_session.target_problem(self._repo.object_store, ref, new)
            if problem is not None:
                raise HookError(problem)
        if self._importing is not None and ref == DEFAULT_BRANCH.encode() and new != ZERO_SHA:
            self._importing(new.decode("ascii"))
        return b"", b""  # dulwich relays (stdout, stderr) to the client
