"""Git smart HTTP's view of the service, shared by both composition roots: who a token is,
and what the access rules need to know about a project and one of its forks."""

from __future__ import annotations

from forkhorse.domain.git_access import GitPrincipal, RepoFacts
from forkhorse.githttp.http import RepoLookup, TokenResolver
from forkhorse.service.facade import Service
from forkhorse.service.identity import Caller


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
