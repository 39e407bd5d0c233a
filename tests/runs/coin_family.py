"""A family file's text for tests: a fair coin's negation pair (a control: both exact 0.5)."""

from __future__ import annotations

COIN_FAMILY = """
id = "{id}"
title = "A fair coin"
shape = "negation"
control = true
variables = ["heads"]
[[statements]]
id = "{heads}"
text = "{text}"
formula = "heads"
exact = 0.5
[[statements]]
id = "tails"
text = "A fair coin tossed once does not land heads."
formula = "not heads"
exact = 0.5
"""


def coin_family(
    family_id: str = "coin", *, heads_id: str = "heads",
    heads_text: str = "A fair coin tossed once lands heads.",
) -> str:
    """The family's TOML text; ids and text are put in as written (TOML escapes and all)."""
    return COIN_FAMILY.format(id=family_id, heads=heads_id, text=heads_text)
