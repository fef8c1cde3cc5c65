"""Only the promote path mints the canonical write capability."""

from pathlib import Path

import forkhorse

PACKAGE = Path(forkhorse.__file__).parent


def test_only_the_promote_path_mints_the_canonical_write_capability() -> None:
    callers = sorted(
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if "mint_canonical_write_capability(" in path.read_text(encoding="utf-8")
    )
    # The write step of the promote workflow; on AWS the template also denies canonical
    # writes to every other function.
    assert callers == ["domain/git_access.py", "service/promote/steps.py"]
