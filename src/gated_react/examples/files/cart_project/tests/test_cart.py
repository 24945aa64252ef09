from cart import Cart


def test_an_empty_cart_costs_nothing() -> None:
    assert Cart().total_cents() == 0


def test_the_total_counts_every_unit() -> None:
    cart = Cart()
    cart.add("mug", 1250, quantity=2)
    cart.add("tee", 1999)
    assert cart.total_cents() == 4499


def test_a_discount_applies_to_the_whole_cart() -> None:
    cart = Cart()
    cart.add("mug", 1000, quantity=3)
    assert cart.total_cents(discount_percent=10) == 2700
