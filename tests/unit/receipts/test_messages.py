"""Messages: 4 KiB of UTF-8, control/bidi/invisible escaped, stack suffixes removed."""

from forkhorse.domain.messages import MESSAGE_BUDGET_BYTES, sanitize_message
from hypothesis import given
from hypothesis import strategies as st


def test_plain_text_is_unchanged() -> None:
    assert sanitize_message("Checked brand.json.") == "Checked brand.json."
    assert sanitize_message("two\nlines\twith tab") == "two\nlines\twith tab"


def test_control_and_bidi_characters_are_escaped() -> None:
    hostile = "ok\u202egnp.exe\x1b[31m\x00\u2066\u200f\rend"
    assert sanitize_message(hostile) == "ok\\u202egnp.exe\\u001b[31m\\u0000\\u2066\\u200f\\u000dend"


def test_zero_width_tag_and_bom_characters_are_escaped() -> None:
    hidden = "\ufeffok\u200b\u200c\u200d\u2060\u2064 done\U000e0041\U000e007f"
    assert sanitize_message(hidden) == (
        "\\ufeffok\\u200b\\u200c\\u200d\\u2060\\u2064 done\\U000e0041\\U000e007f"
    )


def test_escaped_invisible_characters_keep_the_4_kib_budget() -> None:
    message = sanitize_message("\u200b" * 5000)
    assert len(message.encode("utf-8")) <= MESSAGE_BUDGET_BYTES
    assert message.endswith("…")
    assert "\u200b" not in message


def test_javascript_stack_frames_are_removed() -> None:
    text = "Error: brand.json is empty\n    at default (file:///quick/brand.js:3:9)\n    at run"
    assert sanitize_message(text) == "Error: brand.json is empty"


def test_python_tracebacks_are_removed() -> None:
    text = (
        "Check failed\nTraceback (most recent call last):\n"
        '  File "/srv/app.py", line 3, in <module>\n    boom()\nValueError: secret'
    )
    assert sanitize_message(text) == "Check failed"
    assert sanitize_message('bad\n  File "/x.py", line 12, in f\n') == "bad"


def test_long_messages_keep_4_kib_without_splitting_a_character() -> None:
    message = sanitize_message("€" * 5000)
    encoded = message.encode("utf-8")
    assert len(encoded) <= MESSAGE_BUDGET_BYTES
    assert message.endswith("…")
    assert set(message[:-1]) == {"€"}


@given(st.text(max_size=6000))
def test_any_text_becomes_safe(text: str) -> None:
    message = sanitize_message(text)
    assert len(message.encode("utf-8")) <= MESSAGE_BUDGET_BYTES
    assert not any(c in message for c in "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
    assert not any(c in message for c in "\u200b\u200c\u200d\u2060\u2063\ufeff")
    assert not any(0xE0000 <= ord(c) <= 0xE007F for c in message)
    assert all(c in "\n\t" or ord(c) >= 0x20 for c in message if ord(c) < 0x7F)
    assert not any(line.startswith("    at ") for line in message.split("\n"))
