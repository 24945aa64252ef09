"""A shopping cart: line items with unit prices in cents, and the total."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Item:
    sku: str
    unit_cents: int
    quantity: int = 1


class Cart:
    def __init__(self) -> None:
        self.items: list[Item] = []

    def add(self, sku: str, unit_cents: int, quantity: int = 1) -> None:
        if unit_cents < 0 or quantity < 1:
            raise ValueError("price must be >= 0 and quantity >= 1")
        self.items.append(Item(sku, unit_cents, quantity))

    def total_cents(self, discount_percent: int = 0) -> int:
        """The sum of all lines, minus a whole-cart discount (rounded down to the cent)."""
        subtotal = sum(item.unit_cents for item in self.items)
        return subtotal - subtotal * discount_percent // 100
