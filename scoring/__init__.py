"""Numbers from answers: Dutch-book LPs, repair by projection, Brier scores, statistics."""

from scoring import stats
from scoring.brier import brier
from scoring.dutch_book import DutchBookResult, dutch_books
from scoring.repair import repair

__all__ = ["DutchBookResult", "brier", "dutch_books", "repair", "stats"]
