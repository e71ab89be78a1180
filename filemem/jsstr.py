"""JavaScript string semantics the protocol is defined in: UTF-16 lengths, JS trimming,
ASCII-only lowercasing and ``JSON.stringify`` as the reference prints it in messages.

A leaf: it imports nothing of filemem, so the error tree and the model can both use it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Final

# ECMAScript WhiteSpace + LineTerminator: what String.prototype.trim() removes.
JS_WHITESPACE: Final = (
    "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
    "\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
)
_ASCII_LOWER: Final = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def js_trim(s: str) -> str:
    return s.strip(JS_WHITESPACE)


def utf16_len(s: str) -> int:
    """JavaScript ``s.length``: astral characters count twice."""
    if s.isascii():
        return len(s)
    return len(s.encode("utf-16-le", "surrogatepass")) // 2


def utf16_prefix(s: str, n: int) -> str:
    """The first ``n`` UTF-16 code units of ``s`` (never splitting a surrogate pair)."""
    if utf16_len(s) <= n:
        return s
    out: list[str] = []
    used = 0
    for ch in s:
        w = 2 if ord(ch) > 0xFFFF else 1
        if used + w > n:
            break
        out.append(ch)
        used += w
    return "".join(out)


def excerpt(s: str, n: int) -> str:
    """``s`` if it has at most ``n`` code units, else its first ``n`` plus an ellipsis."""
    return s if utf16_len(s) <= n else utf16_prefix(s, n) + "\u2026"


def ascii_lower(s: str) -> str:
    if s.isascii():  # str.lower is the same there, and much quicker than translate
        return s.lower()
    return s.translate(_ASCII_LOWER)


# a str as JSON text, not ASCII-escaped: ``json.dumps(s, ensure_ascii=False)``, which builds
# an encoder on every call (~0.9 µs where this takes ~0.3: every quoted id a file is encoded
# with, every audit text a commit message carries)
json_str: Final[Callable[[str], str]] = json.JSONEncoder(ensure_ascii=False).encode


def js_json(value: Any, *, missing: bool = False) -> str:
    """``JSON.stringify(value)`` as the reference prints it inside messages."""
    if missing:
        return "undefined"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError):
        return json.dumps(str(value), ensure_ascii=False)


__all__ = ["JS_WHITESPACE", "ascii_lower", "excerpt", "js_json", "js_trim", "json_str",
           "utf16_len", "utf16_prefix"]
