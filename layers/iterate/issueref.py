"""Short references to issues: a stable handle of a few hex characters for each issue id.

Issue ids say what they are about and run long (`missing-together-Incident-Zip-Incident-Address-…`); the
summary prints a short handle beside each issue, and `followup`, `fix` and `accept` take it wherever they take
an id. A handle is the start of the id's SHA-256, SHORT characters long, longer where two issues of one run
would share it; the same id always gets the same handle in the same run.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

SHORT = 6


def _digest(issue_id: str) -> str:
    return hashlib.sha256(issue_id.encode("utf-8")).hexdigest()


def short_ids(ids: Iterable[str]) -> dict[str, str]:
    """Each id's handle: the shortest start of its digest (at least SHORT) that no other id of `ids` shares.
    (Sorted, a digest shares its longest start with a neighbour: one pass, however many issues.)"""
    ordered = sorted((_digest(i), i) for i in dict.fromkeys(ids))

    def common(a: str, b: str) -> int:
        n = 0
        while n < len(a) and a[n] == b[n]:
            n += 1
        return n

    found = {}
    for k, (digest, issue_id) in enumerate(ordered):
        shared = max(
            common(digest, ordered[k - 1][0]) if k > 0 else 0,
            common(digest, ordered[k + 1][0]) if k + 1 < len(ordered) else 0,
        )
        found[issue_id] = digest[: max(SHORT, shared + 1)]
    return found


def resolve(given: str, ids: Iterable[str]) -> str | None:
    """The id `given` names: an id itself, or the one id whose digest starts with `given` (SHORT hex
    characters or more); None when it names none or more than one."""
    ids = list(ids)
    if given in ids:
        return given
    text = given.strip().lower()
    if len(text) < SHORT or any(ch not in "0123456789abcdef" for ch in text):
        return None
    matches = [i for i in ids if _digest(i).startswith(text)]
    return matches[0] if len(matches) == 1 else None
