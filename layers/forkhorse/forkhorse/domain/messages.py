"""Check messages: project-authored text made safe to show.

A message keeps at most 4 KiB of UTF-8, shows control, bidi, zero-width, Unicode
tag and byte-order-mark characters as escapes (so they cannot reorder, hide or
smuggle text in a console), and loses any stack-shaped suffix (stacks leak paths
and provider internals).
"""

import re
import unicodedata

MESSAGE_BUDGET_BYTES = 4 * 1024
_ELLIPSIS = "…"

# A stack begins at a JS frame, a Python traceback header or a Python frame line;
# everything after it (further frames, the exception line) belongs to the stack.
_STACK_START = re.compile(
    r"^(?:[ \t]+at [^\n]*"
    r"|[ \t]*Traceback \(most recent call last\):[^\n]*"
    r"|[ \t]*File \"[^\n]*\", line \d+[^\n]*)$",
    re.MULTILINE,
)
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
# Zero-width space, (non-)joiners and marks, word joiner, invisible operators, and the BOM.
_INVISIBLE = frozenset(
    [chr(code) for code in range(0x200B, 0x2010)]
    + [chr(code) for code in range(0x2060, 0x2065)]
    + ["\ufeff"]
)
_TAGS = range(0xE0000, 0xE0080)  # Unicode tag characters: invisible ASCII look-alikes
_KEPT_CONTROLS = frozenset("\n\t")
_ESCAPED_CATEGORIES = frozenset({"Cc", "Cs", "Zl", "Zp"})


def _strip_stack(text: str) -> str:
    match = _STACK_START.search(text)
    return text if match is None else text[: match.start()]


def _needs_escape(char: str) -> bool:
    if char in _KEPT_CONTROLS:
        return False
    if char in _BIDI or char in _INVISIBLE or ord(char) in _TAGS:
        return True
    return unicodedata.category(char) in _ESCAPED_CATEGORIES


def _escaped(char: str) -> str:
    code = ord(char)
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def _escape(text: str) -> str:
    return "".join(_escaped(c) if _needs_escape(c) else c for c in text)


# What a terminal acts on or hides, all in the Basic Multilingual Plane: C0 controls, DEL and
# C1 controls (category Cc: ESC, BEL, CSI...), the bidi and zero-width marks, the line and
# paragraph separators, lone surrogates and the BOM.
_TERMINAL_UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ud800-\udfff]"
)


def escape_controls(text: str, keep: str = "") -> str:
    """`text` with every character a terminal would act on, or that would hide or reorder
    text, shown as a `\\uXXXX` escape (but those in `keep`). Every log line goes through it
    (`forkhorse.observability`): a request's path or header, or a ref name, never reaches an
    operator's terminal as ESC or BEL. The escapes are also valid inside a JSON string."""
    if _TERMINAL_UNSAFE.search(text) is None:
        return text
    return _TERMINAL_UNSAFE.sub(
        lambda found: found[0] if found[0] in keep else _escaped(found[0]), text
    )


def _truncate_utf8(text: str, budget: int) -> str:
    encoded = text.encode("utf-8")
    if len(encoded) <= budget:
        return text
    room = budget - len(_ELLIPSIS.encode("utf-8"))
    # "ignore" drops only the bytes of a character cut at the boundary.
    return encoded[:room].decode("utf-8", "ignore") + _ELLIPSIS


def sanitize_message(text: str) -> str:
    """At most 4 KiB of UTF-8, control/bidi/invisible characters escaped, stack suffix
    removed."""
    text = text.replace("\r\n", "\n")
    return _truncate_utf8(_escape(_strip_stack(text).rstrip()), MESSAGE_BUDGET_BYTES)
