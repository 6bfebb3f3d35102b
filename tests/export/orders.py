"""A small orders table with known problems, and the same table corrected by hand (the rows fixed, duplicates gone).

The export tests analyse the dirty file with the real engine, export its rules, and run them with the real
tools on both files: the checks that encode confirmed issues fail on the dirty file; every check passes on the clean.
"""

from __future__ import annotations

import csv
import random
from pathlib import Path

COLUMNS = [
    "order_id", "order_date", "customer_id", "email", "phone", "city", "state",
    "product", "category", "quantity", "unit_price", "status",
]  # fmt: skip
CITIES = [
    ("Denver", "CO"),
    ("Austin", "TX"),
    ("Boston", "MA"),
    ("Seattle", "WA"),
    ("Chicago", "IL"),
    ("Miami", "FL"),
]
PRODUCTS = [
    ("Green Tea 100g", "Tea", "6.50"),
    ("Chai Blend 250g", "Tea", "9.25"),
    ("Espresso Beans 1kg", "Coffee", "24.00"),
    ("Decaf Beans 500g", "Coffee", "14.75"),
    ("Pour-Over Kettle", "Equipment", "39.90"),
    ("Ceramic Mug", "Accessories", "12.00"),
]
STATUSES = ["delivered"] * 6 + ["shipped"] * 3 + ["cancelled", "returned"]
ROWS = 400


def clean_rows(seed: int = 13) -> list[dict[str, str]]:
    rnd = random.Random(seed)
    customers = []
    for k in range(40):
        cid = f"C{100 + k}"
        city, state = CITIES[k % len(CITIES)]
        phone = f"({rnd.randint(200, 989)}) {rnd.randint(200, 989)}-{rnd.randint(1000, 9999)}"
        customers.append((cid, f"{cid.lower()}@example.com", phone, city, state))
    rows = []
    for n in range(ROWS):
        cid, email, phone, city, state = customers[rnd.randrange(len(customers))]
        product, category, price = PRODUCTS[rnd.randrange(len(PRODUCTS))]
        month, day = rnd.randint(1, 12), rnd.randint(1, 28)
        rows.append(
            {
                "order_id": f"ORD-{10001 + n}",
                "order_date": f"2025-{month:02d}-{day:02d}",
                "customer_id": cid,
                "email": email,
                "phone": phone,
                "city": city,
                "state": state,
                "product": product,
                "category": category,
                "quantity": str(rnd.choice([1, 1, 1, 2, 2, 3, 4, 5])),
                "unit_price": price,
                "status": rnd.choice(STATUSES),
            }
        )
    return rows


def dirty_rows(seed: int = 13) -> list[dict[str, str]]:
    """The clean rows with problems planted at fixed places (each kind in distinct rows), plus two duplicates."""
    rows = [dict(r) for r in clean_rows(seed)]

    def at(start: int, count: int, step: int = 37) -> list[dict[str, str]]:
        return [rows[(start + i * step) % ROWS] for i in range(count)]

    for r in at(3, 5):  # dates in a second format
        y, m, d = r["order_date"].split("-")
        r["order_date"] = f"{d}/{m}/{y}"
    for r, day in zip(at(19, 3), ["2025-02-30", "2025-02-31", "2025-04-31"], strict=True):  # no such day
        r["order_date"] = day
    for r in at(5, 6):  # a placeholder posing as an email
        r["email"] = "N/A"
    for r in at(7, 4):  # phones breaking the pattern
        r["phone"] = r["phone"].replace("(", "").replace(") ", "-")
    for r, typo in zip(at(9, 6), ["Cofee", "Cofee", "Cofee", "tea", "tea", "tea"], strict=True):  # typos
        r["category"] = typo
    for r in at(11, 4):  # stray whitespace
        r["status"] = r["status"] + " "
    for r, q in zip(at(13, 4), ["500", "800", "two", "two"], strict=True):  # outliers and text in numbers
        r["quantity"] = q
    for r in at(15, 4):  # numbers written with a currency sign
        r["unit_price"] = "$" + r["unit_price"]
    for r in at(17, 3):  # a customer id pasted from another order: email, phone and city say otherwise
        r["customer_id"] = "C107" if r["customer_id"] != "C107" else "C108"
    rows.insert(200, dict(rows[20]))  # exact duplicates
    rows.insert(300, dict(rows[40]))
    return rows


def write(path: Path, rows: list[dict[str, str]], columns: list[str] = COLUMNS) -> Path:
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=columns)
        w.writeheader()
        w.writerows(rows)
    return path
