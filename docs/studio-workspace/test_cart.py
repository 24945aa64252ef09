from src.cart import total


def test_no_discount_below_three_items() -> None:
    assert total([10.0, 5.0]) == 15.0


def test_discount_from_three_items() -> None:
    assert total([10.0, 10.0, 10.0]) == 27.0
