"""Local mode's application: the runtime's adapters behind the service, the API and git.

`forkhorse serve`, the demo and the end-to-end tests build the same `LocalApp`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from forkhorse.adapters.git.http import GitHttpApp, RepoLookup, TokenResolver
from forkhorse.api.app import ForkhorseApi
from forkhorse.api.wsgi import LocalHttp
from forkhorse.domain.git_access import GitPrincipal, RepoFacts
from forkhorse.ports.events import PUSH_EVENT
from forkhorse.runner.promote_local import AfterStep, LocalPromotes
from forkhorse.service import Service, ServiceSettings
from forkhorse.service.identity import Caller
from forkhorse.wiring.local import HISTORY_DIR, LocalRuntime

OWNER_TOKEN_FILE = "owner-token"  # noqa: S105 - a file name, not a secret
RECOVERY_WAIT_ON_CLOSE_SECONDS = 10.0


@dataclass
class LocalApp:
    runtime: LocalRuntime
    service: Service
    api: ForkhorseApi
    http: LocalHttp
    promotes: LocalPromotes

    def close(self) -> None:
        self.service.shutdown()
        # recovery reads the store: let it finish (it is short) before the store closes
        self.promotes.recovered(RECOVERY_WAIT_ON_CLOSE_SECONDS)
        self.runtime.close()


def build_local_app(
    runtime: LocalRuntime, settings: ServiceSettings, after_step: AfterStep | None = None
) -> LocalApp:
    """`after_step` is called after each promote step's journal write (tests crash there)."""
    service = Service(runtime.store, runtime.git, runtime.supervisor, runtime.deps.clock, settings)
    promotes = LocalPromotes(
        service.context, runtime.journal, runtime.home / HISTORY_DIR, after_step
    )
    runtime.supervisor.attach_promotes(promotes)
    promotes.resume_in_background()  # the server listens at once
    runtime.events.subscribe(PUSH_EVENT, lambda detail: _follow(service, detail))
    api = ForkhorseApi(service)
    git = GitHttpApp(
        runtime.git, git_token_resolver(service), git_repo_lookup(service), runtime.events
    )
    return LocalApp(runtime, service, api, LocalHttp(api, git), promotes)


def _follow(service: Service, detail: Mapping[str, object]) -> None:
    service.reviews.on_push(detail)


def git_token_resolver(service: Service) -> TokenResolver:
    """Git smart HTTP authenticates with the same tokens as the API."""

    def resolve(token: str) -> GitPrincipal | None:
        caller: Caller | None = service.authenticate(token)
        return None if caller is None else GitPrincipal(caller.id, caller.kind)

    return resolve


def git_repo_lookup(service: Service) -> RepoLookup:
    """What the git access rules need to know about a project and one of its forks."""

    store = service.context.store

    def lookup(project_id: str, fork_id: str | None) -> RepoFacts | None:
        project = store.get_project(project_id)
        if project is None:
            return None
        fork = None if fork_id is None else store.get_fork(project_id, fork_id)
        return RepoFacts(
            owner=project.owner_id,
            members=frozenset(store.list_members(project_id)),
            fork_owner=None if fork is None else fork.owner_agent_id,
        )

    return lookup


def ensure_owner_token(service: Service, home: Path) -> str:
    """The owner's token, in `home/owner-token` (mode 0600); created on first start."""
    path = home / OWNER_TOKEN_FILE
    if path.is_file():
        token = path.read_text(encoding="utf-8").strip()
        if service.authenticate(token) is not None:
            return token
    _, token = service.projects.create_principal("owner", "owner")
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(token + "\n")
    return token
