"""Tools for the fraction-helper skill."""

from fractions import Fraction


def add_fractions(a_numerator: int, a_denominator: int, b_numerator: int, b_denominator: int) -> str:
    """Add two fractions and return the simplified sum as 'n/d'.

    The denominators must not be zero.
    """
    total = Fraction(a_numerator, a_denominator) + Fraction(b_numerator, b_denominator)
    return f"{total.numerator}/{total.denominator}"


TOOLS = [add_fractions]
