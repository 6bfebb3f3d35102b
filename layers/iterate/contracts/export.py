"""Write the JSON Schema of every public contract: `python -m iterate.contracts.export DIR`."""

import json
import sys
from pathlib import Path

from iterate.contracts import (
    AcceptedFile,
    AnalysisResult,
    CodeInvestigation,
    DatasetProfile,
    DatasetUnderstanding,
    Issue,
    SmartFixFollowup,
)

EXPORTED = (
    AcceptedFile,
    AnalysisResult,
    CodeInvestigation,
    DatasetProfile,
    DatasetUnderstanding,
    Issue,
    SmartFixFollowup,
)


def schemas() -> dict[str, dict]:
    """The JSON Schema of each exported contract, by file name."""
    return {f"{m.__name__}.schema.json": m.model_json_schema() for m in EXPORTED}


def main(argv: list[str] | None = None) -> int:
    out = Path((argv or sys.argv[1:] or ["layers/iterate/schemas"])[0])
    out.mkdir(parents=True, exist_ok=True)
    for name, schema in schemas().items():
        (out / name).write_text(json.dumps(schema, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
