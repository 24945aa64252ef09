"""A shopping cart total with a volume discount."""


def total(prices: list[float], discount_from: int = 3) -> float:
    """Sum of the prices; 10% off when the cart holds at least ``discount_from`` items."""
    subtotal = sum(prices)
    if len(prices) > discount_from:
        return round(subtotal * 0.9, 2)
    return subtotal
