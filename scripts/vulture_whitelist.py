"""Names vulture cannot see used: a framework reads them, by name or by override.

Vulture matches names, not objects, so each entry is an attribute of a stand-in. Never
imported or run; `make lint` scans it with the code ([tool.vulture] in pyproject.toml).
"""

# ruff: noqa: B018 - each line is a use of a name, which is all vulture reads

from typing import Any

_: Any = None

# Wire fields: pydantic models and TypedDicts that are serialized, never read by attribute.
_.verified_levels  # attest/statements.py: the SLSA verification summary
_.slsa_version
_.type_
_.claimed_at  # domain/model.py: Claim
_.schema_version  # domain/receipts.py: ReceiptRecord
_.pre_existing  # flow/classify.py: the classification's TypedDicts
_.sourceReceiptId
_.supersedesReceiptId
_.reviewKind
_.headSha
_.discovery  # the step contracts Step Functions passes between states
_.quick_gate
_.lease_expires_at
_.from_  # responses.py: response bodies
_.to
_.enforced
_.console_url
_.keytype
_.shut  # tests/unit/runner/test_asl_contracts.py: a contract renamed on purpose

# Dulwich: methods and attributes its servers and object stores call on our subclasses.
_.open_repository  # Backend
_.add_thin_pack  # PackBasedObjectStore
_._get_pack  # BucketBasedObjectStore
_.get_named_file  # BaseRepo
_.basedir
_.get_config
_.get_config_stack
_.get_description
_.filter_spec  # UploadPackHandler
_.prefer_bitmaps
_.read_proto_line  # the shallow-request reader patched onto dulwich's protocol
_._handle_shallow_request
_.committer  # Commit and Tag fields tests set before serializing
_.author_time
_.author_timezone
_.commit_timezone
_.tagger
_.tag_time
_.tag_timezone

# The standard library and other frameworks.
_.gname  # tarfile.TarInfo fields, written into archives
_.uname
_.msg  # logging.LogRecord, read by Formatter.format
_.__getattr__  # a module's lazy attributes (PEP 562)
_.log_message  # http.server.BaseHTTPRequestHandler
_.abstract  # locust User classes
_.wait_time
_.get_call_kwargs  # schemathesis' state machine hook
_.memory_limit_in_mb  # the Lambda context stand-in (tests/support/lambda_context.py)
_.invoked_function_arn
_.get_remaining_time_in_millis
_.exitCode  # moto's ECS container, set to fake a stopped task
_.last_modified  # moto's S3 key, set to age a pack
_.eni  # a property's getter parameter (moto's NetworkInterface)
_.qualifier  # Lambda invoke's signature, patched in tests

# The typed client has a call for every route (tests/unit/client/test_client_routes.py
# calls each against a mock server); nothing in the repository calls these two otherwise.
_.review_attestation
_.promotion_attestation
# FullProgress's pollSeconds: read from executions an earlier version started, never written.
_.poll_seconds
