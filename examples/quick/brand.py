"""An example quick check in Python: brand.json parses and names the brand.

The repository runs its JavaScript twin, .forkhorse/quick/brand.js. Python modules run in the
quick sandbox too: only the standard library, and files only through `ctx`.
"""

import json

REQUIRED_STRINGS = ("name", "slug", "mark")


def check(ctx):
    text = ctx.read("brand.json")
    if text is None:
        return {"ok": False, "message": "brand.json is missing."}
    try:
        brand = json.loads(text)
    except ValueError:
        return {"ok": False, "message": "brand.json is not valid JSON."}
    if not isinstance(brand, dict):
        return {"ok": False, "message": "brand.json must be a JSON object."}
    missing = [
        key
        for key in REQUIRED_STRINGS
        if not isinstance(brand.get(key), str) or not brand[key].strip()
    ]
    if missing:
        return {
            "ok": False,
            "message": "brand.json needs non-empty strings for: " + ", ".join(missing) + ".",
        }
    return {"ok": True, "message": "Checked brand.json."}
