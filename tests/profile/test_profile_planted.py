"""The profiler on the seeded benchmark generator (40,000 rows): what was planted shows in the profile."""

import sys
from pathlib import Path

import pytest

from iterate.io import read_table
from iterate.profile import profile_table

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import gen_bench

pytestmark = pytest.mark.unit
ROWS = 40_000


def about(found: int, planted: int) -> bool:
    """Planted cells can overwrite each other (a few fewer) and duplicated rows copy them (a few more)."""
    return 0.9 * planted <= found <= 1.05 * planted


@pytest.fixture(scope="module")
def planted_profile(tmp_path_factory: pytest.TempPathFactory):
    path = tmp_path_factory.mktemp("planted") / "bench.csv"
    planted = gen_bench.write(path, n_rows=ROWS, seed=7)
    return planted, profile_table(read_table(path))


def test_duplicates_are_exactly_the_planted_ones(planted_profile):
    planted, profile = planted_profile
    assert profile.duplicates.exactRows == planted["exact_duplicate_rows"]
    assert profile.duplicates.nearRows == planted["near_duplicate_rows"]
    assert profile.candidateKeys == [["order_id"]]


def test_column_types_and_formats(planted_profile):
    _, profile = planted_profile
    got = {c.name: (c.semanticType, c.format) for c in profile.columns}
    assert got["order_date"] == ("date", "%Y-%m-%d")
    assert got["shipped_at"] == ("datetime", "%Y-%m-%d %H:%M")
    assert got["email"] == ("email", None)
    assert got["phone"] == ("phone", None)
    assert got["zip"] == ("postal_code", "us")
    assert got["amount"] == ("currency", "$")
    assert got["discount"] == ("percent", "%")
    assert got["weight"] == ("quantity", "kg")
    assert got["is_member"] == ("boolean", "true/false")
    assert got["url"] == ("url", None)
    assert got["quantity"][0] == "integer"
    assert got["unit_price"][0] == "decimal"
    assert got["notes"][0] == "text"


def test_planted_cell_errors_show_as_missing_nonconforming_or_other_formats(planted_profile):
    planted, profile = planted_profile
    col = {c.name: c for c in profile.columns}
    assert about(col["amount"].missing, planted["amount_blank"])
    assert about(col["phone"].disguisedMissing, planted["phone_missing_token"])
    assert about(col["quantity"].disguisedMissing, planted["quantity_sentinel"])
    assert about(col["order_date"].disguisedMissing, planted["date_sentinel"])
    formats = {f.value: f.count for f in col["order_date"].dates.formats}
    assert about(sum(v for k, v in formats.items() if k != "%Y-%m-%d"), planted["date_other_format"])
    assert about(round((1 - col["email"].conformity) * col["email"].count), planted["email_invalid"])
    assert about(
        round((1 - col["weight"].conformity) * col["weight"].count),
        planted["weight_other_unit"] + planted["weight_no_unit"],
    )


def test_zip_city_dependency_with_its_planted_violations(planted_profile):
    planted, profile = planted_profile
    deps = {(d.lhs[0], d.rhs): d for d in profile.functionalDependencies}
    assert deps[("zip", "state")].violatingRows == 0
    assert about(deps[("zip", "city")].violatingRows, planted["zip_city_violation"])
