"""The orders database shipped with the data-agent example, and the script that built it.

``files/orders.sqlite`` is a real SQLite file in the package. It was written by ``build`` from
the rows below; ``python -m gated_react.examples.orders_db PATH`` writes the same database again
(the tests compare the shipped file with a fresh build row by row).
"""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

SCHEMA = """
CREATE TABLE products (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    category TEXT NOT NULL,
    unit_price_cents INTEGER NOT NULL CHECK (unit_price_cents >= 0)
);
CREATE TABLE orders (
    id INTEGER PRIMARY KEY,
    customer TEXT NOT NULL,
    product_id INTEGER NOT NULL REFERENCES products (id),
    quantity INTEGER NOT NULL CHECK (quantity >= 1),
    amount_cents INTEGER NOT NULL CHECK (amount_cents >= 0),
    status TEXT NOT NULL CHECK (status IN ('completed', 'pending', 'cancelled', 'refunded')),
    ordered_on TEXT NOT NULL
);
"""

# id, name, category, unit price in cents
PRODUCTS = (
    (1, "Espresso machine", "kitchen", 34900),
    (2, "Burr grinder", "kitchen", 12900),
    (3, "Milk jug", "kitchen", 1850),
    (4, "Descaler 6-pack", "supplies", 2400),
    (5, "Travel mug", "accessories", 2250),
    (6, "Coffee beans 1 kg", "supplies", 2890),
)

# id, customer, product id, quantity, status, date; the amount is unit price x quantity
ORDERS = (
    (1001, "Ada", 1, 1, "completed", "2026-03-02"),
    (1002, "Ben", 6, 3, "completed", "2026-03-02"),
    (1003, "Chen", 5, 2, "pending", "2026-03-03"),
    (1004, "Dana", 2, 1, "completed", "2026-03-04"),
    (1005, "Emil", 4, 2, "cancelled", "2026-03-05"),
    (1006, "Fatma", 3, 1, "completed", "2026-03-05"),
    (1007, "Ada", 6, 2, "completed", "2026-03-07"),
    (1008, "Goran", 1, 1, "refunded", "2026-03-08"),
    (1009, "Hana", 5, 4, "completed", "2026-03-09"),
    (1010, "Ivo", 2, 1, "pending", "2026-03-10"),
    (1011, "Ben", 4, 1, "completed", "2026-03-11"),
    (1012, "Chen", 6, 5, "completed", "2026-03-12"),
    (1013, "Jonas", 1, 1, "cancelled", "2026-03-13"),
    (1014, "Dana", 3, 2, "completed", "2026-03-14"),
    (1015, "Kim", 5, 1, "refunded", "2026-03-15"),
    (1016, "Lea", 2, 1, "completed", "2026-03-16"),
    (1017, "Emil", 6, 1, "pending", "2026-03-17"),
    (1018, "Fatma", 1, 1, "completed", "2026-03-18"),
)


def build(path: Path) -> None:
    """Write the database to ``path`` (which must not exist yet)."""
    if path.exists():
        raise FileExistsError(f"{path} already exists")
    price = {pid: cents for pid, _, _, cents in PRODUCTS}
    conn = sqlite3.connect(path)
    try:
        with conn:
            conn.executescript(SCHEMA)
            conn.executemany("INSERT INTO products VALUES (?, ?, ?, ?)", PRODUCTS)
            conn.executemany(
                "INSERT INTO orders VALUES (?, ?, ?, ?, ?, ?, ?)",
                [
                    (oid, who, pid, qty, price[pid] * qty, status, day)
                    for oid, who, pid, qty, status, day in ORDERS
                ],
            )
        conn.execute("VACUUM")
    finally:
        conn.close()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m gated_react.examples.orders_db PATH")
    try:
        build(Path(sys.argv[1]))
    except (OSError, sqlite3.Error) as exc:
        sys.exit(f"cannot build the orders database: {exc}")
