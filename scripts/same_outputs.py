"""Whether two `iterate analyze` output folders hold the same results: flags.csv byte for byte, the detector's
candidate issues, and each issue's status, counts, examples and proof output (what a change meant to keep
every result must keep). Prints what differs; exit status 1 when anything does.

    python scripts/same_outputs.py out/before out/after [more pairs: a1 b1 a2 b2 ...]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def outcomes(out: Path) -> list[tuple[Any, ...]]:
    """Each issue's id, status, counts and examples, as analysis.json has them (to compare two runs)."""
    analysis = json.loads((out / "analysis.json").read_text(encoding="utf-8"))
    found = []
    for issue in analysis.get("issues", []):
        evidence = issue.get("evidence") or {}
        found.append(
            (
                issue["id"],
                issue["status"],
                issue.get("affectedRows"),
                json.dumps(evidence.get("examples"), sort_keys=True),
                json.dumps((issue.get("investigation") or {}).get("output"), sort_keys=True),
            )
        )
    return found


def differences(a: Path, b: Path) -> list[str]:
    """What differs between the two folders' results (empty: the same)."""
    found = []
    if (a / "flags.csv").read_bytes() != (b / "flags.csv").read_bytes():
        found.append("flags.csv")
    if json.loads((a / "candidates.json").read_bytes()) != json.loads((b / "candidates.json").read_bytes()):
        found.append("candidates.json")
    left, right = outcomes(a), outcomes(b)
    if left != right:
        ids = {o[0] for o in set(left) ^ set(right)}
        found.append(f"issues ({len(left)} against {len(right)}; differing: {', '.join(sorted(ids)[:8])})")
    return found


def main(argv: list[str]) -> int:
    if len(argv) < 2 or len(argv) % 2:
        print(__doc__, file=sys.stderr)
        return 2
    needed = ("flags.csv", "candidates.json", "analysis.json")
    for folder in argv:
        missing = [name for name in needed if not (Path(folder) / name).is_file()]
        if missing:
            print(f"{folder}: no {', '.join(missing)}: not the --out folder of a finished `iterate analyze`")
            return 2
    differ = 0
    for a, b in zip(argv[::2], argv[1::2], strict=True):
        found = differences(Path(a), Path(b))
        differ += bool(found)
        print(f"{a} vs {b}: {'same' if not found else 'DIFFER: ' + '; '.join(found)}")
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
