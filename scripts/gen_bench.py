"""Generate the seeded benchmark CSV: 1,000,000 rows x 20 mixed columns with planted errors."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

DEFAULT_OUT = Path("bench/data/bench_1m.csv")

FIRST = [
    "James", "Mary", "John", "Patricia", "Robert", "Jennifer", "Michael", "Linda", "William", "Elizabeth",
    "David", "Barbara", "Richard", "Susan", "Joseph", "Jessica", "Thomas", "Sarah", "Charles", "Karen",
    "Chris", "Nancy", "Daniel", "Lisa", "Matthew", "Betty", "Anthony", "Margaret", "Mark", "Sandra",
    "Donald", "Ashley", "Steven", "Kimberly", "Paul", "Emily", "Andrew", "Donna", "Joshua", "Michelle",
    "Kenneth", "Dorothy", "Kevin", "Carol", "Brian", "Amanda", "George", "Melissa", "Edward", "Deborah",
    "Ronald", "Stephanie", "Timothy", "Rebecca", "Jason", "Sharon", "Jeffrey", "Laura", "Ryan", "Cynthia",
]  # fmt: skip
LAST = [
    "Smith", "Johnson", "Williams", "Brown", "Jones", "Garcia", "Miller", "Davis", "Rodriguez", "Martinez",
    "Hernandez", "Lopez", "Gonzalez", "Wilson", "Anderson", "Thomas", "Taylor", "Moore", "Jackson", "Martin",
    "Lee", "Perez", "Thompson", "White", "Harris", "Sanchez", "Clark", "Ramirez", "Lewis", "Robinson",
    "Walker", "Young", "Allen", "King", "Wright", "Scott", "Torres", "Nguyen", "Hill", "Flores",
    "Green", "Adams", "Nelson", "Baker", "Hall", "Rivera", "Campbell", "Mitchell", "Carter", "Roberts",
]  # fmt: skip
DOMAINS = ["gmail.com", "yahoo.com", "outlook.com", "example.org", "acme.co", "mail.net"]
CATEGORIES = [
    "Electronics", "Clothing", "Home & Garden", "Sports", "Toys", "Books",
    "Beauty", "Grocery", "Automotive", "Health", "Office", "Pet Supplies",
]  # fmt: skip
# Typos and case/space variants planted in the category column.
CATEGORY_TYPOS = ["Electronis", "electronics", "Clothng", "CLOTHING", "Home and Garden", "Sports ", "Bookss"]
STATUSES = ["delivered", "shipped", "pending", "cancelled", "returned"]
STATES = ["CA", "NY", "TX", "FL", "IL", "PA", "OH", "GA", "NC", "MI", "NJ", "VA", "WA", "AZ", "MA"]
CITY_PARTS = ["Spring", "River", "Oak", "Maple", "Cedar", "Lake", "Hill", "Fair", "Green", "Clear"]
CITY_SUFFIX = ["field", "ton", "ville", "wood", "port", "view", "dale", "burg", "side", "mont"]
WORDS = [
    "great",
    "fast",
    "delivery",
    "item",
    "arrived",
    "late",
    "damaged",
    "box",
    "customer",
    "asked",
    "refund",
    "gift",
    "wrap",
    "please",
    "call",
    "before",
    "leaving",
    "at",
    "door",
    "quality",
    "good",
    "size",
    "small",
    "large",
    "color",
    "wrong",
    "replaced",
    "thanks",
    "again",
    "order",
]


def _pick(rng: np.random.Generator, choices: list[str], n: int, p: np.ndarray | None = None) -> pa.Array:
    """n strings drawn from choices (dictionary-decoded so later string kernels see plain text)."""
    idx = rng.choice(len(choices), size=n, p=p)
    return pa.array(np.asarray(choices, dtype=object)[idx], type=pa.string())


def _num(values: np.ndarray) -> pa.Array:
    return pc.cast(pa.array(values), pa.string())


def _fixed(values: np.ndarray, decimals: int) -> pa.Array:
    """Fixed-point text of floats without a Python loop: integer part, dot, zero-padded fraction."""
    scaled = np.round(np.abs(values) * 10**decimals).astype(np.int64)
    whole = _num(scaled // 10**decimals)
    frac = pc.utf8_lpad(_num(scaled % 10**decimals), width=decimals, padding="0")
    sign = pa.array(np.where(values < 0, "-", ""), type=pa.string())
    return pc.binary_join_element_wise(sign, whole, ".", frac, "")


def _thousands(values: np.ndarray) -> pa.Array:
    """Amounts written like 1,234.56 (thousands separator only where needed)."""
    text = _fixed(values, 2)
    return pc.replace_substring_regex(text, pattern=r"^(\d+)(\d{3})\.", replacement=r"\1,\2.")


def _join(*parts: pa.Array | str) -> pa.Array:
    return pc.binary_join_element_wise(*parts, "")


def _plant(rng: np.random.Generator, col: pa.Array, share: float, values: pa.Array | list[str]) -> pa.Array:
    """Replace a random share of cells with the given values (cycled), returning the new column."""
    n = len(col)
    rows = rng.choice(n, size=int(n * share), replace=False)
    out = np.asarray(col.to_numpy(zero_copy_only=False), dtype=object)
    if isinstance(values, list):
        out[rows] = np.asarray(values, dtype=object)[rng.integers(0, len(values), size=len(rows))]
    else:
        out[rows] = np.asarray(values.to_numpy(zero_copy_only=False), dtype=object)[rows]
    return pa.array(out, type=pa.string())


def generate(n_rows: int = 1_000_000, seed: int = 7) -> tuple[pa.Table, dict[str, int]]:
    """The benchmark table (all text) and how many errors of each kind were planted."""
    rng = np.random.default_rng(seed)
    planted: dict[str, int] = {}
    n = n_rows

    order_id = _join("ORD-", pc.utf8_lpad(_num(np.arange(1, n + 1)), width=7, padding="0"))
    n_customers = max(10, n // 10)
    cust = rng.integers(0, n_customers, size=n)
    customer_id = _join("C", pc.utf8_lpad(_num(cust), width=6, padding="0"))
    # A customer keeps one name and email, so customer_id -> name is a real dependency.
    first_of = rng.integers(0, len(FIRST), size=n_customers)
    last_of = rng.integers(0, len(LAST), size=n_customers)
    first = np.asarray(FIRST, dtype=object)[first_of[cust]]
    last = np.asarray(LAST, dtype=object)[last_of[cust]]
    name = _join(pa.array(first, type=pa.string()), " ", pa.array(last, type=pa.string()))
    dom = np.asarray(DOMAINS, dtype=object)[rng.integers(0, len(DOMAINS), size=n_customers)[cust]]
    email = _join(
        pc.utf8_lower(pc.utf8_slice_codeunits(pa.array(first, type=pa.string()), 0, 1)),
        ".",
        pc.utf8_lower(pa.array(last, type=pa.string())),
        _num(cust % 1000),
        "@",
        pa.array(dom, type=pa.string()),
    )
    bad_email = _join(
        pc.utf8_lower(pa.array(first, type=pa.string())), " at ", pa.array(dom, type=pa.string())
    )
    email = _plant(rng, email, 0.003, bad_email)
    planted["email_invalid"] = int(n * 0.003)

    area = rng.integers(200, 999, size=n)
    mid = rng.integers(200, 999, size=n)
    tail = rng.integers(0, 10000, size=n)
    tail_s = pc.utf8_lpad(_num(tail), width=4, padding="0")
    phone = _join("(", _num(area), ") ", _num(mid), "-", tail_s)
    phone_alt = _join(_num(area), ".", _num(mid), ".", tail_s)
    phone = _plant(rng, phone, 0.01, phone_alt)
    phone = _plant(rng, phone, 0.02, ["N/A"])
    planted["phone_other_format"] = int(n * 0.01)
    planted["phone_missing_token"] = int(n * 0.02)

    start = np.datetime64("2022-01-01", "s")
    secs = rng.integers(0, 3 * 365 * 86400, size=n)
    ts = pa.array(start + secs.astype("timedelta64[s]"))
    order_date = pc.strftime(ts, format="%Y-%m-%d")
    order_date = _plant(rng, order_date, 0.01, pc.strftime(ts, format="%d/%m/%Y"))
    order_date = _plant(rng, order_date, 0.005, pc.strftime(ts, format="%b %d, %Y"))
    order_date = _plant(rng, order_date, 0.002, ["1900-01-01"])
    planted["date_other_format"] = int(n * 0.015)
    planted["date_sentinel"] = int(n * 0.002)
    shipped = pa.array(start + (secs + rng.integers(3600, 10 * 86400, size=n)).astype("timedelta64[s]"))
    shipped_at = pc.strftime(shipped, format="%Y-%m-%d %H:%M")

    weights = np.linspace(2.0, 0.5, len(CATEGORIES))
    category = _pick(rng, CATEGORIES, n, weights / weights.sum())
    category = _plant(rng, category, 0.004, CATEGORY_TYPOS)
    planted["category_typo"] = int(n * 0.004)
    status = _pick(rng, STATUSES, n, np.array([0.6, 0.2, 0.1, 0.06, 0.04]))

    qty = rng.integers(1, 21, size=n)
    quantity = _plant(rng, _num(qty), 0.003, ["9999"])
    quantity = _plant(rng, quantity, 0.001, ["-1"])
    planted["quantity_sentinel"] = int(n * 0.004)
    price = np.round(rng.lognormal(3.0, 0.8, size=n), 2)
    unit_price = _fixed(price, 2)
    unit_price = _plant(rng, unit_price, 0.002, _join(unit_price, " USD"))
    outliers = _fixed(price * 1000, 2)
    unit_price = _plant(rng, unit_price, 0.0005, outliers)
    planted["price_unit_in_number"] = int(n * 0.002)
    planted["price_outlier"] = int(n * 0.0005)
    amount = _join("$", _thousands(price * qty))
    amount = _plant(rng, amount, 0.01, [""])
    planted["amount_blank"] = int(n * 0.01)
    disc = rng.choice([0, 5, 10, 15, 20, 25, 30], size=n, p=[0.4, 0.15, 0.15, 0.1, 0.1, 0.05, 0.05])
    discount = _join(_num(disc), "%")
    discount = _plant(rng, discount, 0.003, _fixed(disc / 100.0, 2))
    planted["discount_fraction_not_percent"] = int(n * 0.003)
    kg = np.round(rng.gamma(2.0, 1.5, size=n), 1)
    weight = _join(_fixed(kg, 1), " kg")
    weight = _plant(rng, weight, 0.005, _join(_fixed(kg * 2.20462, 1), " lb"))
    weight = _plant(rng, weight, 0.002, _fixed(kg, 1))
    planted["weight_other_unit"] = int(n * 0.005)
    planted["weight_no_unit"] = int(n * 0.002)

    # Zip -> city and zip -> state are dependencies; a few rows break them.
    n_zips = 3000
    zip_codes = rng.choice(np.arange(1000, 99999), size=n_zips, replace=False)
    zip_city = np.asarray(
        [CITY_PARTS[i % 10] + CITY_SUFFIX[(i // 10) % 10] for i in range(n_zips)], dtype=object
    )
    zip_state = np.asarray(STATES, dtype=object)[rng.integers(0, len(STATES), size=n_zips)]
    z = rng.integers(0, n_zips, size=n)
    zip_col = pc.utf8_lpad(_num(zip_codes[z]), width=5, padding="0")
    city = pa.array(zip_city[z], type=pa.string())
    wrong_city = pa.array(zip_city[(z + 17) % n_zips], type=pa.string())
    city = _plant(rng, city, 0.003, wrong_city)
    planted["zip_city_violation"] = int(n * 0.003)
    state = pa.array(zip_state[z], type=pa.string())

    is_member = _pick(rng, ["true", "false"], n, np.array([0.35, 0.65]))
    is_member = _plant(rng, is_member, 0.002, ["yes", "no", "Y"])
    planted["boolean_other_spelling"] = int(n * 0.002)
    url = _join("https://ex.shop/", _num(rng.integers(10000, 99999, size=n)))
    url = _plant(rng, url, 0.001, ["ex.shop/"])
    planted["url_invalid"] = int(n * 0.001)

    n_words = rng.integers(2, 7, size=n)
    w = rng.integers(0, len(WORDS), size=(n, 8))
    words = np.asarray(WORDS, dtype=object)[w]
    note_parts = [pa.array(np.where(n_words > k, words[:, k], None), type=pa.string()) for k in range(8)]
    notes = pc.binary_join_element_wise(*note_parts, " ", null_handling="skip")
    notes = pc.if_else(pa.array(rng.random(n) < 0.75), "", notes)

    names = [
        "order_id", "customer_id", "customer_name", "email", "phone", "order_date", "shipped_at",
        "category", "status", "quantity", "unit_price", "amount", "discount", "weight", "zip", "city",
        "state", "is_member", "url", "notes",
    ]  # fmt: skip
    cols = [
        order_id, customer_id, name, email, phone, order_date, shipped_at, category, status, quantity,
        unit_price, amount, discount, weight, zip_col, city, state, is_member, url, notes,
    ]  # fmt: skip
    table = pa.table(dict(zip(names, cols, strict=True)))

    # Exact duplicates (copies of earlier rows) and near duplicates (name case and spacing changed).
    n_dup = n // 200
    n_near = n // 500
    src = rng.choice(n // 2, size=n_dup + n_near, replace=False)
    dst = rng.choice(np.arange(n // 2, n), size=n_dup + n_near, replace=False)
    take = np.arange(n)
    take[dst] = src
    table = table.take(pa.array(take))
    near_rows = dst[n_dup:]
    col = np.asarray(table.column("customer_name").to_numpy(), dtype=object)
    col[near_rows] = np.char.upper(col[near_rows].astype(str)).astype(object)
    col[near_rows[::2]] = np.asarray([v + "  " for v in col[near_rows[::2]]], dtype=object)
    table = table.set_column(2, "customer_name", pa.array(col, type=pa.string()))
    planted["exact_duplicate_rows"] = n_dup
    planted["near_duplicate_rows"] = n_near
    return table, planted


def write(path: Path, n_rows: int = 1_000_000, seed: int = 7) -> dict[str, int]:
    """Write the benchmark CSV and a JSON sidecar with what was planted."""
    table, planted = generate(n_rows, seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    # pyarrow's writer quotes every string; quote only the cells that need it, as most exports do.
    cells = []
    for col in table.columns:
        text = col.combine_chunks()
        needs = pc.match_substring_regex(text, pattern='[,"\n]')
        quoted = _join('"', pc.replace_substring(text, pattern='"', replacement='""'), '"')
        cells.append(pc.if_else(needs, quoted, text))
    lines = pc.binary_join_element_wise(*cells, ",")
    with path.open("wb") as fh:
        fh.write((",".join(table.column_names) + "\n").encode())
        for chunk in range(0, len(lines), 100_000):
            fh.write(("\n".join(lines.slice(chunk, 100_000).to_pylist()) + "\n").encode())
    path.with_suffix(".planted.json").write_text(json.dumps(planted, indent=2) + "\n", encoding="utf-8")
    return planted


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    write(args.out, args.rows, args.seed)
    size = args.out.stat().st_size / 1e6
    print(f"wrote {args.out} ({args.rows:,} rows, {size:.0f} MB) in {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
