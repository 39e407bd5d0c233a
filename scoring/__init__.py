"""Numbers from answers: Dutch-book LPs, repair by projection, Brier scores, statistics."""

from scoring.dutch_book import DutchBookResult, dutch_books

__all__ = ["DutchBookResult", "dutch_books"]
