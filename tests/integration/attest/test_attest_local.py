"""Signed evidence end to end in local mode: a real run (bubblewrap and podman) signs its
record at attach, the API serves the envelope and the keys, `forkhorse verify` checks them,
and a promotion's VSA names the before-promote receipt it relied on."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from forkhorse.cli import main
from forkhorse.wiring.local import rotate_local_key

from tests.integration.api.support import FAILING, PASSING
from tests.support.attest import payload_of
from tests.support.live import Project, Server, new_lane


def _review_path(project: Project, review_id: str) -> str:
    return f"/projects/{project.id}/reviews/{review_id}"


def _save(path: Path, value: Any) -> Path:
    path.write_text(json.dumps(value))
    return path


def _verify(envelope: Path, keys: Path, *args: str) -> int:
    return main(["verify", str(envelope), "--key", str(keys), *args])


def _ledger_promotion(server: Server, project: Project) -> str:
    return str(server.owner.state(project.id)["ledger"][-1]["promotionId"])


def test_a_receipt_is_signed_at_attach_served_and_verified(
    server: Server, required: Project, tmp_path: Path
) -> None:
    lane = new_lane(required)
    commit, review = lane.reviewed(PASSING)
    path = f"{_review_path(required, review['id'])}/attestation"
    envelope = server.owner.ok("GET", path)
    # The reviewing agent may fetch it; another member agent does not see the unpublished
    # review at all; nobody anonymous.
    assert lane.agent.ok("GET", path) == envelope
    stranger = new_lane(required, "stranger")
    assert stranger.agent.call("GET", path)[0] == 404
    assert server.client(None).call("GET", path)[0] == 401
    predicate = payload_of(envelope)["predicate"]
    assert predicate["record"] == {"sha256": review["receipt"]["digest"]}
    assert (predicate["commit"], predicate["status"], predicate["mocked"]) == (
        commit,
        "passed",
        False,
    )
    assert [c["platform"] for c in predicate["checks"]] == ["local-bwrap", "podman"]
    keys = server.client(None).ok("GET", "/keys")  # public: no token needed
    assert [key["keyid"] for key in keys["keys"]] == [
        signature["keyid"] for signature in envelope["signatures"]
    ]
    assert keys["keys"][-1]["current"] is True
    assert "private" not in json.dumps(keys).lower()
    saved, key_file = _save(tmp_path / "receipt.json", envelope), _save(tmp_path / "k.json", keys)
    args = ["--commit", commit, "--project", required.id, "--require-passed"]
    assert _verify(saved, key_file, *args) == 0
    assert _verify(saved, key_file, "--project", "another-project") == 1


def test_a_failed_receipt_is_signed_as_failed(
    server: Server, required: Project, tmp_path: Path
) -> None:
    lane = new_lane(required)
    _, review = lane.reviewed(FAILING)
    envelope = server.owner.ok("GET", f"{_review_path(required, review['id'])}/attestation")
    assert payload_of(envelope)["predicate"]["status"] == "failed"
    keys = _save(tmp_path / "k.json", server.client(None).ok("GET", "/keys"))
    saved = _save(tmp_path / "receipt.json", envelope)
    assert _verify(saved, keys) == 0
    assert _verify(saved, keys, "--require-passed") == 1


def test_a_required_promotion_emits_a_passing_vsa_naming_the_before_promote_receipt(
    server: Server, required: Project, tmp_path: Path
) -> None:
    lane = new_lane(required)
    commit, review = lane.reviewed(PASSING)
    path = _review_path(required, review["id"])
    first = _save(tmp_path / "review-created.json", server.owner.ok("GET", f"{path}/attestation"))
    assert server.owner.call("POST", f"{path}/approve", {"commit": commit})[0] == 200
    status, promoted = server.owner.promote(required.id, review["id"], commit)
    assert status == 200, promoted
    # Promote reran the checks: the review's attestation is now the before-promote record's.
    fresh_envelope = server.owner.ok("GET", f"{path}/attestation")
    assert payload_of(fresh_envelope)["predicate"]["trigger"] == "before-promote"
    fresh = _save(tmp_path / "before-promote.json", fresh_envelope)
    promotion_id = _ledger_promotion(server, required)
    vsa_path = f"/projects/{required.id}/promotions/{promotion_id}/attestation"
    vsa = server.owner.ok("GET", vsa_path)
    assert lane.agent.ok("GET", vsa_path) == vsa
    predicate = payload_of(vsa)["predicate"]
    assert predicate["verificationResult"] == "PASSED"
    annotations = predicate["policy"]["annotations"]
    assert annotations["beforePromoteDigest"] == promoted["promotion"]["digest"]
    keys = _save(tmp_path / "k.json", server.client(None).ok("GET", "/keys"))
    saved = _save(tmp_path / "vsa.json", vsa)
    args = ["--commit", commit, "--require-passed", "--input"]
    assert _verify(saved, keys, *args, str(fresh)) == 0
    # The review-created receipt is not what the promotion relied on: refused.
    assert _verify(saved, keys, *args, str(first)) == 1


def test_an_advisory_promotion_vsa_says_so_and_never_passes(
    server: Server, advisory: Project, tmp_path: Path
) -> None:
    lane = new_lane(advisory)
    commit, review = lane.reviewed(PASSING)
    path = _review_path(advisory, review["id"])
    assert server.owner.call("POST", f"{path}/approve", {"commit": commit})[0] == 200
    assert server.owner.promote(advisory.id, review["id"], commit)[0] == 200
    promotion_id = _ledger_promotion(server, advisory)
    vsa = server.owner.ok("GET", f"/projects/{advisory.id}/promotions/{promotion_id}/attestation")
    predicate = payload_of(vsa)["predicate"]
    assert (predicate["verificationResult"], predicate["verifiedLevels"]) == ("FAILED", ["FAILED"])
    assert predicate["policy"]["annotations"]["mode"] == "advisory"
    keys = _save(tmp_path / "k.json", server.client(None).ok("GET", "/keys"))
    saved = _save(tmp_path / "vsa.json", vsa)
    assert _verify(saved, keys, "--commit", commit) == 0
    assert _verify(saved, keys, "--require-passed") == 1


def test_unknown_attestations_are_404(server: Server, required: Project) -> None:
    missing = server.owner.call("GET", f"/projects/{required.id}/promotions/nope/attestation")
    assert missing == (404, {"error": "Promotion not found."})
    lane = new_lane(required)
    commit = lane.push({"notes.txt": "no checks\n"})
    review = lane.request_review(commit)
    server.owner.wait_receipt(required.id, review["id"])
    status, body = server.owner.call("GET", f"{_review_path(required, review['id'])}/attestation")
    assert (status, body) == (
        404,
        {"error": "No signed attestation exists for this review's receipt."},
    )


def test_the_key_is_private_to_the_home(server: Server) -> None:
    keys = server.home / "keys"
    assert stat.S_IMODE(keys.stat().st_mode) == 0o700
    private = list(keys.glob("*.key"))
    assert len(private) == 1
    assert stat.S_IMODE(private[0].stat().st_mode) == 0o600
    assert private[0].stat().st_uid == os.getuid()


def test_rotation_signs_with_the_new_key_and_keeps_the_old_one_listed(
    server: Server, required: Project, tmp_path: Path
) -> None:
    lane = new_lane(required)
    _, before = lane.reviewed(PASSING)
    old = server.owner.ok("GET", f"{_review_path(required, before['id'])}/attestation")
    new_keyid = rotate_local_key(server.home)
    server.restart()
    assert not (server.home / "keys" / f"{old['signatures'][0]['keyid']}.key").exists()
    commit = lane.push({"again.txt": "x\n", **PASSING})
    review = lane.request_review(commit)
    server.owner.wait_receipt(required.id, review["id"])
    new = server.owner.ok("GET", f"{_review_path(required, review['id'])}/attestation")
    assert new["signatures"][0]["keyid"] == new_keyid
    keys = server.client(None).ok("GET", "/keys")["keys"]
    assert [key["keyid"] for key in keys][-1] == new_keyid
    assert old["signatures"][0]["keyid"] in [key["keyid"] for key in keys]
    key_file = _save(tmp_path / "k.json", {"keys": keys})
    assert _verify(_save(tmp_path / "old.json", old), key_file) == 0
    assert _verify(_save(tmp_path / "new.json", new), key_file) == 0
