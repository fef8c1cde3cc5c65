"""An agent that knows only the URL and its token finds its work: `GET /projects` answers
its memberships (an owner's own projects), and `GET /projects/{id}/packets` pages through a
project's packets with their live claims, bounded like the review pages."""

from __future__ import annotations

from typing import Any

from forkhorse.domain.limits import PAGE
from forkhorse.service.listings import BAD_CURSOR, BAD_LIMIT, page_cursor

from tests.support.live import Server, new_project


def _ids(listed: Any) -> list[str]:
    return [project["id"] for project in listed["projects"]]


def test_an_agent_lists_the_projects_it_is_a_member_of_and_an_outsider_none(
    server: Server,
) -> None:
    first, second, other = (new_project(server, True) for _ in range(3))
    agent, agent_id = first.agent("lister")
    server.owner.ok("POST", f"/projects/{second.id}/members", {"agentId": agent_id}, expect=201)
    listed = agent.ok("GET", "/projects")
    assert sorted(_ids(listed)) == sorted([first.id, second.id])
    assert other.id not in _ids(listed)
    shown = next(p for p in listed["projects"] if p["id"] == first.id)
    assert (shown["canonicalHead"], shown["cloneUrl"]) == (first.initial, first.canonical_url)
    outsider = server.owner.ok("POST", "/agents", {"name": "outsider"}, expect=201)
    assert server.client(outsider["token"]).ok("GET", "/projects") == {"projects": []}
    # The owner still lists all its own projects; another owner none of them.
    assert {first.id, second.id, other.id} <= set(_ids(server.owner.ok("GET", "/projects")))
    assert server.new_owner().ok("GET", "/projects") == {"projects": []}


def test_packets_page_with_their_claims_for_members_and_the_owner(server: Server) -> None:
    project = new_project(server, True)
    agent, agent_id = project.agent("claimer")
    packets = sorted(project.packet(f"packet {n}") for n in range(5))
    claimed = agent.ok("POST", f"/projects/{project.id}/packets/{packets[1]}/claim", expect=201)
    path = f"/projects/{project.id}/packets"
    seen: list[dict[str, Any]] = []
    url = f"{path}?limit=2"
    for _ in range(10):
        page = agent.ok("GET", url)
        assert len(page["packets"]) <= 2
        seen += page["packets"]
        if page["next"] is None:
            break
        url = f"{path}?limit=2&cursor={page['next']}"
    assert [p["id"] for p in seen] == packets
    by_id = {p["id"]: p for p in seen}
    assert by_id[packets[1]]["claim"] == claimed["claim"]
    assert by_id[packets[1]]["claim"]["agentId"] == agent_id
    assert [p["id"] for p in seen if p["claim"] is None] == packets[:1] + packets[2:]
    assert by_id[packets[0]]["title"].startswith("packet ")
    # The owner sees the same; the default page holds them all.
    assert server.owner.ok("GET", path) == {"packets": seen, "next": None}
    # Bounded like the review pages.
    for limit in (0, PAGE.max_size + 1):
        assert agent.call("GET", f"{path}?limit={limit}") == (400, {"error": BAD_LIMIT})
    for cursor in ("junk", page_cursor("packet-unknown")):
        assert agent.call("GET", f"{path}?cursor={cursor}") == (400, {"error": BAD_CURSOR})
    # A non-member agent is refused; another owner does not see the project.
    outsider = server.owner.ok("POST", "/agents", {"name": "outsider"}, expect=201)
    status, _ = server.client(outsider["token"]).call("GET", path)
    assert status == 403
    assert server.new_owner().call("GET", path)[0] == 404
