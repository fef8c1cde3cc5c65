"""Port placeholder: the owning issue defines this Protocol."""

from typing import Protocol


class Orchestrator(Protocol):
    def start_run(self, project_id: str, review_id: str, generation: str, trigger: str) -> str: ...
