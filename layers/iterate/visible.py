"""visible(): text from a file or an LLM made safe to show, control characters turned into escapes.

Column names, cell values, file names and issue text reach a terminal, report.html and flags.csv. A raw
ESC can clear a screen or rewrite what was printed, a right-to-left override (U+202E) makes text read
backwards, C1 controls act like ESC sequences on some terminals. Every output of Iterate passes such
text through `visible` (or `json_visible` for JSON text); text without them comes back unchanged.
"""

from __future__ import annotations

import re
from functools import lru_cache

# C0 controls, DEL, C1 controls; bidirectional marks, embeddings, overrides and isolates (the "Trojan
# Source" set); line and paragraph separators; lone surrogates (undecodable bytes in a file name).
_ACTING = "\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029\ud800-\udfff"
_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape(match: re.Match[str]) -> str:
    ch = match.group()
    if ch in _NAMED:
        return _NAMED[ch]
    code = ord(ch)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


@lru_cache(maxsize=8)
def _pattern(keep: str) -> re.Pattern[str]:
    if not keep:
        return re.compile(f"[{_ACTING}]")
    return re.compile(f"(?![{re.escape(keep)}])[{_ACTING}]")


def visible(text: object, *, keep: str = "") -> str:
    """`text` with every control character shown as an escape: ESC as `\\x1b`, TAB as `\\t`, U+202E as
    `\\u202e`; characters in `keep` (e.g. "\\n" for text laid out on several lines) are left as they are.

    A backslash is not escaped, so `\\x1b` typed as four characters reads the same as an escaped ESC:
    names must stay as written, and the escaped form is only for showing.
    """
    return _pattern(keep).sub(_escape, str(text))


_JSON_ACTING = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


def json_visible(text: str) -> str:
    """JSON text with the characters JSON itself leaves raw (DEL, C1, bidi controls, separators) written
    as `\\uXXXX` escapes: the same JSON value, safe to print. (JSON always escapes C0 controls.)"""
    return _JSON_ACTING.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
