"""Which command a file given to another is for: a campaign spec given to `dutchbook check`,
or a `check` file's set of probabilities given to a command reading a spec. Both sides ask
`spec_or_probabilities`, and import this module alone (`check` imports neither `runs.spec`
nor the providers)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def json_object(text: str) -> Mapping[str, Any]:
    """`text`'s JSON object, or an empty one: what tells a `check` file written in JSON
    (examples/atoms.json) from a spec that is not valid TOML, which no JSON object is."""
    if not text.lstrip().startswith("{"):  # no TOML document opens so; most never parsed
        return {}
    try:
        raw = json.loads(text)
    except (ValueError, RecursionError):
        return {}
    return raw if isinstance(raw, dict) else {}


#: Top-level keys only a campaign spec has, and only a `dutchbook check` file has: what
#: `spec_or_probabilities` tells a file given to the other command by.
_SPEC_ONLY_KEYS = frozenset({"models", "arms"})
_CHECK_ONLY_KEYS = frozenset({"events", "variables", "atoms", "constraints"})


def spec_or_probabilities(raw: Mapping[str, Any]) -> str | None:
    """What a top-level table is: "spec" where it has a key only a campaign spec has, else
    "probabilities" for one with a key only a `check` file has, else None. `check` and the
    commands reading a spec ask it of a table with keys they do not know, to say which
    command the file is for rather than name its first unknown key."""
    if _SPEC_ONLY_KEYS & raw.keys():
        return "spec"
    return "probabilities" if _CHECK_ONLY_KEYS & raw.keys() else None


def not_a_spec(path: Path | str) -> str:
    """What a command reading a spec says of a `dutchbook check` file
    (`spec_or_probabilities`)."""
    return (
        f"a set of probabilities for `dutchbook check`, not a campaign spec: `dutchbook check "
        f"{path}` checks it (a spec, like runs/specs/quickstart.toml, names [[models]] and "
        "[[arms]]; `dutchbook plan` checks one and `dutchbook run` runs it)"
    )


def not_probabilities(path: Path | str) -> str:
    """What `dutchbook check` says of a campaign spec (`spec_or_probabilities`)."""
    return (
        f"a campaign spec, not one set of probabilities: `dutchbook plan {path}` checks a spec "
        "and `dutchbook run` runs it (`check` reads a file like examples/figure1.toml)"
    )
