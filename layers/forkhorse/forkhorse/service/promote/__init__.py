"""Promote, in one place: the request (`request`), its rules (`rules`), the contracts and
steps of the PromoteRun workflow (`contracts`, `steps`) and the promotion's attestation
(`attest`). The runner only drives these steps (Step Functions or `runner.local.promote`)."""
