"""Random formula trees for property tests: every node type, nested up to 12 leaves."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import strategies as st

from panels.formula import And, ExactlyOne, Implies, Node, Not, Or, Var


def formula_trees(names: Sequence[str], most_args: int = 3) -> st.SearchStrategy[Node]:
    """Trees over the variables `names`, n-ary nodes taking up to `most_args` operands."""
    leaves = st.sampled_from(list(names)).map(Var)

    def extend(children: st.SearchStrategy[Node]) -> st.SearchStrategy[Node]:
        many = st.lists(children, min_size=2, max_size=most_args).map(tuple)
        return st.one_of(
            children.map(Not),
            many.map(And),
            many.map(Or),
            st.tuples(children, children).map(lambda pair: Implies(*pair)),
            st.lists(children, min_size=1, max_size=most_args).map(
                lambda xs: ExactlyOne(tuple(xs))
            ),
        )

    return st.recursive(leaves, extend, max_leaves=12)
