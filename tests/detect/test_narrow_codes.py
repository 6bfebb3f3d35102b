"""The detection finds exactly the same with narrow codes (int8, int16) as with int32 codes: every finding's rows,
cells, evidence, scores, stats and description. The table is made so that codes of either width meet arithmetic
past their range: columns just below and above 127 and 32,767 distinct values, dependencies between them (pair
keys x * n_y + y), broken entities, duplicates, outliers and rare spellings."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import iterate.detect as detect_module
import iterate.detect.dependencies as dependencies_module
import iterate.table as table_module
from iterate.io import read_table

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
from detect_signatures import signature

pytestmark = pytest.mark.unit

ROWS = 60_000


def _write_table(path: Path) -> None:
    rng = np.random.default_rng(5)
    ids = rng.permutation(ROWS)
    wide_key = ids % 40_000  # 40,000 distinct: int32 codes
    key16 = ids % 32_767  # 32,767 distinct: int16 at its top
    key_past16 = ids % 32_768  # 32,768 distinct: int32
    owner = key16 % 200  # determined by key16 (pair keys up to 32,767 x 200: past int16)
    owner[rng.choice(ROWS, 60, replace=False)] += 1
    zip_code = rng.integers(0, 300, ROWS)  # int16
    city = zip_code % 128  # 128 distinct: int16, determined by zip
    state = zip_code % 127  # 127 distinct: int8 at its top, determined by zip
    status = rng.integers(0, 5, ROWS)
    amount = np.round(rng.gamma(2.0, 40.0, ROWS), 2)
    amount[rng.choice(ROWS, 25, replace=False)] *= 1_000  # outliers
    city_text = np.array([f"City {c:03d}" for c in range(128)], dtype=object)[city]
    broken = rng.choice(ROWS, 120, replace=False)
    city_text[broken] = np.array([f"City {c:03d}" for c in range(128)], dtype=object)[
        (city[broken] + 7) % 128
    ]
    status_text = np.array(["delivered", "shipped", "pending", "cancelled", "returned"], dtype=object)[status]
    status_text[rng.choice(ROWS, 40, replace=False)] = "Shiped"
    email = np.array([f"user{i}@example.org" for i in ids], dtype=object)
    email[rng.choice(ROWS, 150, replace=False)] = "n/a"
    day = rng.integers(0, 365, ROWS)  # int16
    date = np.array([f"2024-{1 + d // 31 % 12:02d}-{1 + d % 28:02d}" for d in range(365)], dtype=object)[day]
    odd = rng.choice(ROWS, 200, replace=False)
    date[odd] = [f"{1 + d % 28:02d}/{1 + d // 31 % 12:02d}/2024" for d in day[odd]]
    rows = [
        f"{i},K{w:05d},A{k:05d},B{p:05d},O{o:03d},{z:03d},{c},S{s:03d},{t},{a},{e},{d}"
        for i, w, k, p, o, z, c, s, t, a, e, d in zip(
            ids,
            wide_key,
            key16,
            key_past16,
            owner,
            zip_code,
            city_text,
            state,
            status_text,
            amount,
            email,
            date,
            strict=True,
        )
    ]
    rows += rows[:300]  # exact duplicates
    path.write_text(
        "id,wide_key,key16,key_past16,owner,zip,city,state,status,amount,email,date\n"
        + "\n".join(rows)
        + "\n"
    )


def _candidates(monkeypatch) -> list[str]:
    """Every detector's findings as they reach the decision (the dependency violations, rare values and outliers
    here are candidates the decision does not flag): recorded on each detect()."""
    seen: list[str] = []
    decide = detect_module.decide

    def recording(findings, *args, **kwargs):
        seen.append(
            repr(
                [
                    (
                        f.key,
                        f.rows.tolist(),
                        f.cols.tolist(),
                        None if f.llr is None else np.round(f.llr, 9).tolist(),
                    )
                    for f in findings
                ]
            )
        )
        return decide(findings, *args, **kwargs)

    monkeypatch.setattr(detect_module, "decide", recording)
    return seen


def test_detection_is_the_same_with_narrow_and_int32_codes(tmp_path, monkeypatch):
    path = tmp_path / "codes.csv"
    _write_table(path)
    candidates = _candidates(monkeypatch)
    widths = {c.name: c.codes.dtype for c in read_table(path).columns}
    # The premise: every width is present, including both sides of each boundary.
    assert widths["status"] == np.int8 and widths["state"] == np.int8
    assert widths["city"] == np.int16 and widths["key16"] == np.int16
    assert widths["key_past16"] == np.int32 and widths["wide_key"] == np.int32
    narrow = signature(str(path))

    def int32_codes(n_unique: int) -> type[np.signedinteger]:
        return np.int32 if n_unique <= np.iinfo(np.int32).max else np.int64

    monkeypatch.setattr(table_module, "code_dtype", int32_codes)
    monkeypatch.setattr(dependencies_module, "code_dtype", int32_codes)
    assert read_table(path).column("status").codes.dtype == np.int32
    assert signature(str(path)) == narrow
    assert len(candidates) == 2 and candidates[0] == candidates[1]
    for kind in ("fd:city", "outliers:amount", "rare:status", "dates:date", "duplicates:exact"):
        assert kind in candidates[0]
