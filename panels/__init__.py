"""What is asked: events over finite outcome spaces, their atoms and incidence, the paper's
stock panels, question families, and the wording of every elicitation arm.

The core names are re-exported here; the stock panels live in `panels.stock`, families in
`panels.families`.
"""

from panels.algebra import Atom, Panel
from panels.events import Clause, Event
from panels.formula import Formula, FormulaError, parse
from panels.space import OutcomeSpace

__all__ = ["Atom", "Clause", "Event", "Formula", "FormulaError", "OutcomeSpace", "Panel", "parse"]
