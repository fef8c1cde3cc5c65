"""Commits built with dulwich straight into a GitStore's object store (no network, fast)."""

from collections.abc import Mapping

from dulwich.objects import Blob, Commit, Tree
from forkhorse.adapters.git.store import DulwichGitStore

AUTHOR = b"Forkhorse Tests <tests@forkhorse.invalid>"


def _tree(store: DulwichGitStore, files: dict[str, bytes]) -> bytes:
    """Write nested trees for `files` (paths with '/') and return the root tree id."""
    subtrees: dict[str, dict[str, bytes]] = {}
    tree = Tree()
    for path, content in files.items():
        head, _, rest = path.partition("/")
        if rest:
            subtrees.setdefault(head, {})[rest] = content
            continue
        blob = Blob.from_string(content)
        store.objects.add_object(blob)
        tree.add(head.encode(), 0o100644, blob.id)
    for name, children in subtrees.items():
        tree.add(name.encode(), 0o040000, _tree(store, children))
    store.objects.add_object(tree)
    return tree.id


def commit_files(
    store: DulwichGitStore, files: Mapping[str, str | bytes], parent: str | None = None
) -> str:
    """Commit `files` on top of `parent` (or as a root) and return the commit SHA."""
    encoded = {p: c.encode() if isinstance(c, str) else c for p, c in files.items()}
    commit = Commit()
    commit.tree = _tree(store, encoded)
    commit.parents = [parent.encode()] if parent else []
    commit.author = commit.committer = AUTHOR
    commit.author_time = commit.commit_time = 1_790_000_000
    commit.author_timezone = commit.commit_timezone = 0
    commit.message = b"test commit\n"
    store.objects.add_object(commit)
    return commit.id.decode()
