"""Colour-blind-safe colours. Sign is never shown by colour alone: bars point up or down and labels carry ±."""

NEGATIVE = "#2166ac"  # blue (PuOr/RdBu family end)
POSITIVE = "#d95f02"  # orange
NEUTRAL = "#777777"
# Okabe–Ito, for a few categorical series.
SERIES = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"]
# Sequential, light to dark blue, for attention weights (0 … 1).
SEQUENTIAL = ["#f7fbff", "#deebf7", "#c6dbef", "#9ecae1", "#6baed6", "#4292c6", "#2171b5", "#08519c", "#08306b"]


def sign_colour(value: float) -> str:
    return POSITIVE if value > 0 else NEGATIVE if value < 0 else NEUTRAL


def signed(value: float, digits: int = 3) -> str:
    """A number with an explicit sign and a true minus: +0.420, −1.250, 0.000."""
    if round(value, digits) == 0:
        return f"{0:.{digits}f}"
    return f"{value:+.{digits}f}".replace("-", "\u2212")
