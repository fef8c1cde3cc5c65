"""Check definitions: the strict parser of a commit's `.forkhorse/checks` file.

Pure: text in, definitions out. Anything the parser does not accept is invalid configuration,
which the runner records as an `infrastructure-error` with `InvalidChecksConfig`'s message.
"""

import hashlib
import json
import re
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel

from forkhorse.domain.wire import WIRE_CONFIG

CHECKS_PATH = ".forkhorse/checks"
QUICK_MODULE_DIR = ".forkhorse/quick/"
MAX_CHECKS = 64
MAX_CHECKS_FILE_BYTES = 64 * 1024
MAX_NAME_LENGTH = 64
MAX_IMAGE_LENGTH = 128
MAX_RUN_LENGTH = 4096
MIN_TIMEOUT_SECONDS = 1
MAX_TIMEOUT_SECONDS = 3600
DEFAULT_FULL_TIMEOUT_SECONDS = 600

QUICK_FIELDS = frozenset({"name", "tier", "module"})
FULL_REQUIRED_FIELDS = frozenset({"name", "tier", "image", "run"})
FULL_FIELDS = FULL_REQUIRED_FIELDS | {"timeoutSeconds"}

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
# A quick module's extension picks its runtime; this is the one place that choice is made.
type QuickLanguage = Literal["python", "javascript"]
QUICK_LANGUAGES: dict[str, QuickLanguage] = {".py": "python", ".js": "javascript"}
_MODULE = re.compile(re.escape(QUICK_MODULE_DIR) + r"[A-Za-z0-9_][A-Za-z0-9_-]*\.(?:py|js)")
_IMAGE = re.compile(r"[a-z0-9][a-z0-9._-]*")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class InvalidChecksConfig(ValueError):
    """`.forkhorse/checks` is invalid or unsafe; `message` says precisely what is wrong."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class QuickCheckDef(BaseModel):
    """A quick check: one Python (stdlib-only) or JavaScript (import-free ES) module run in
    the quick sandbox."""

    model_config = WIRE_CONFIG

    name: str
    tier: Literal["quick"] = "quick"
    module: str

    def definition(self) -> dict[str, object]:
        """The normalized wire form recorded in a receipt's check record."""
        return self.model_dump(mode="json")

    @property
    def language(self) -> QuickLanguage:
        """The runtime the module needs, from its extension (the parser admits only these)."""
        return QUICK_LANGUAGES[self.module[self.module.rindex(".") :]]


class FullCheckDef(BaseModel):
    """A full check: a shell command run in a container image named by deployment config."""

    model_config = WIRE_CONFIG

    name: str
    tier: Literal["full"] = "full"
    image: str
    run: str
    timeout_seconds: int = DEFAULT_FULL_TIMEOUT_SECONDS

    def definition(self) -> dict[str, object]:
        """The normalized wire form, with the effective timeout spelled out."""
        return self.model_dump(mode="json")


type CheckDef = QuickCheckDef | FullCheckDef


def in_run_order(checks: Sequence[CheckDef]) -> list[CheckDef]:
    """Quick checks first, each tier in file order: the order a run records them in."""
    return [c for c in checks if c.tier == "quick"] + [c for c in checks if c.tier == "full"]


def parse_checks(text: str) -> list[CheckDef]:
    """Parse `.forkhorse/checks`, raising `InvalidChecksConfig` on anything not strictly valid."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_CHECKS_FILE_BYTES:
        raise InvalidChecksConfig(f"{CHECKS_PATH} is larger than {MAX_CHECKS_FILE_BYTES} bytes.")
    document = _load_strict_json(text)
    if not isinstance(document, list):
        raise InvalidChecksConfig(f"{CHECKS_PATH} must be a JSON array of checks.")
    if not document:
        raise InvalidChecksConfig(f"{CHECKS_PATH} must list at least one check.")
    if len(document) > MAX_CHECKS:
        raise InvalidChecksConfig(
            f"{CHECKS_PATH} lists {len(document)} checks; at most {MAX_CHECKS} are allowed."
        )
    checks = [_parse_check(index, item) for index, item in enumerate(document, start=1)]
    _reject_duplicate_names(checks)
    return checks


def _load_strict_json(text: str) -> object:
    try:
        return json.loads(
            text, object_pairs_hook=_unique_keys_object, parse_constant=_reject_constant
        )
    except InvalidChecksConfig:
        raise
    except (ValueError, RecursionError) as error:
        raise InvalidChecksConfig(f"{CHECKS_PATH} is not valid JSON.") from error


def _unique_keys_object(pairs: list[tuple[str, object]]) -> dict[str, object]:
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            raise InvalidChecksConfig(f"{CHECKS_PATH} repeats the JSON key {_shown(key)}.")
        seen.add(key)
    return dict(pairs)


def _reject_constant(constant: str) -> object:
    raise InvalidChecksConfig(f"{CHECKS_PATH} is not strict JSON: {constant} is not allowed.")


def _parse_check(index: int, item: object) -> CheckDef:
    where = f"{CHECKS_PATH}: check {index}"
    if not isinstance(item, dict):
        raise InvalidChecksConfig(f"{where} must be a JSON object.")
    name = _require_name(where, item)
    where = f"{where} ({json.dumps(name)})"
    tier = item.get("tier")
    if tier == "quick":
        return _parse_quick(where, name, item)
    if tier == "full":
        return _parse_full(where, name, item)
    if "tier" not in item:
        raise InvalidChecksConfig(f'{where} is missing the "tier" field.')
    raise InvalidChecksConfig(f'{where} has tier {_shown(tier)}; it must be "quick" or "full".')


def _require_name(where: str, item: dict[str, object]) -> str:
    if "name" not in item:
        raise InvalidChecksConfig(f'{where} is missing the "name" field.')
    name = item["name"]
    if not isinstance(name, str) or not name:
        raise InvalidChecksConfig(f'{where} must have a non-empty string "name".')
    if len(name) > MAX_NAME_LENGTH or not _NAME.fullmatch(name):
        raise InvalidChecksConfig(
            f"{where} has the name {_shown(name)}; a name is 1 to {MAX_NAME_LENGTH} letters, "
            "digits, dots, underscores or hyphens and starts with a letter or digit."
        )
    return name


def _parse_quick(where: str, name: str, item: dict[str, object]) -> QuickCheckDef:
    _require_exact_fields(where, item, required=QUICK_FIELDS, allowed=QUICK_FIELDS, tier="quick")
    module = item["module"]
    if not isinstance(module, str) or not _MODULE.fullmatch(module):
        raise InvalidChecksConfig(
            f"{where} has the module {_shown(module)}; a quick module must be one .js or .py "
            f"file directly under {QUICK_MODULE_DIR} (letters, digits, underscores or hyphens)."
        )
    return QuickCheckDef(name=name, module=module)


def _parse_full(where: str, name: str, item: dict[str, object]) -> FullCheckDef:
    _require_exact_fields(
        where, item, required=FULL_REQUIRED_FIELDS, allowed=FULL_FIELDS, tier="full"
    )
    image = item["image"]
    if not isinstance(image, str) or len(image) > MAX_IMAGE_LENGTH or not _IMAGE.fullmatch(image):
        raise InvalidChecksConfig(
            f"{where} has the image {_shown(image)}; an image is a configured image name "
            f"of 1 to {MAX_IMAGE_LENGTH} lowercase letters, digits, dots, underscores or hyphens."
        )
    run = item["run"]
    if not isinstance(run, str) or not run.strip():
        raise InvalidChecksConfig(f'{where} must have a non-empty string "run".')
    if len(run) > MAX_RUN_LENGTH or _CONTROL.search(run.replace("\n", "").replace("\t", "")):
        raise InvalidChecksConfig(
            f'{where} has a "run" command longer than {MAX_RUN_LENGTH} characters '
            "or with control characters."
        )
    timeout = item.get("timeoutSeconds", DEFAULT_FULL_TIMEOUT_SECONDS)
    if type(timeout) is not int or not MIN_TIMEOUT_SECONDS <= timeout <= MAX_TIMEOUT_SECONDS:
        raise InvalidChecksConfig(
            f'{where} has "timeoutSeconds" {_shown(timeout)}; it must be a whole number '
            f"from {MIN_TIMEOUT_SECONDS} to {MAX_TIMEOUT_SECONDS}."
        )
    return FullCheckDef(name=name, image=image, run=run, timeout_seconds=timeout)


def _require_exact_fields(
    where: str,
    item: dict[str, object],
    *,
    required: frozenset[str],
    allowed: frozenset[str],
    tier: str,
) -> None:
    unknown = sorted(set(item) - allowed)
    if unknown:
        fields = ", ".join(json.dumps(field) for field in unknown)
        raise InvalidChecksConfig(f"{where} has fields not allowed on a {tier} check: {fields}.")
    missing = sorted(required - set(item))
    if missing:
        fields = ", ".join(json.dumps(field) for field in missing)
        raise InvalidChecksConfig(f"{where} is missing required {tier} check fields: {fields}.")


def _reject_duplicate_names(checks: list[CheckDef]) -> None:
    seen: set[str] = set()
    for check in checks:
        if check.name in seen:
            raise InvalidChecksConfig(f"{CHECKS_PATH} names the check {_shown(check.name)} twice.")
        seen.add(check.name)


def _shown(value: object) -> str:
    """A short, escaped rendering of a rejected value for an error message."""
    rendered = json.dumps(value, ensure_ascii=True)
    return rendered if len(rendered) <= 80 else rendered[:77] + "..."


def quick_module_digest(source: str) -> str:
    """A quick check's image digest: `module:sha256:<hex>` of the module source's UTF-8 bytes."""
    return "module:sha256:" + hashlib.sha256(source.encode("utf-8")).hexdigest()
