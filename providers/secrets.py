"""Keeping credentials out of everything a run prints or writes.

A key must never reach a log line, an exception, a repr or the ledger: runs are shared,
attempt details are written to Parquet, and a leaked key costs money. Adapters hold keys as
`Secret` (whose repr and str are masked) and pass any provider text through `redact` before
it can become a `Failure.detail`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

MASK = "***"
#: Values shorter than this are not treated as secrets: masking "1" or "us" everywhere would
#: garble details while protecting nothing (no real credential is that short).
MIN_SECRET_LENGTH = 6


class Secret:
    """A credential value that only `reveal()` gives back; every other view is masked."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        """The raw value, for exactly one place: the outgoing header."""
        return self._value

    def __repr__(self) -> str:
        return f"Secret('{MASK}')"

    def __str__(self) -> str:
        return MASK

    def __format__(self, spec: str) -> str:
        return MASK

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash((Secret, self._value))

    def __reduce__(self) -> tuple[object, ...]:  # pickling would write the key to disk
        raise TypeError("Secret values are not picklable")


def secret_values(env: Mapping[str, str], names: Iterable[str]) -> tuple[str, ...]:
    """The values of `names` present in `env`, longest first (so overlaps mask fully)."""
    values = {env[name] for name in names if env.get(name)}
    return tuple(sorted(values, key=len, reverse=True))


def redact(text: str, secrets: Iterable[str | Secret]) -> str:
    """`text` with every occurrence of every secret value replaced by `***`."""
    raw = [s.reveal() if isinstance(s, Secret) else s for s in secrets]
    values = sorted({v for v in raw if len(v) >= MIN_SECRET_LENGTH}, key=len, reverse=True)
    # Repeat until stable: a replacement can splice a new occurrence together (a key made of
    # asterisks, or one secret's tail next to another). Each pass shortens the text, so it ends.
    changed = True
    while changed:
        changed = False
        for value in values:
            if value in text:
                text = text.replace(value, MASK)
                changed = True
    return text


def redact_env(text: str, env: Mapping[str, str], names: Iterable[str]) -> str:
    """`redact` for the credential variables an adapter read from `env`."""
    return redact(text, secret_values(env, names))


def first_set(env: Mapping[str, str], names: Iterable[str]) -> tuple[str, Secret] | None:
    """The first of `names` set (non-empty) in `env`, with its value wrapped as a `Secret`."""
    for name in names:
        value = env.get(name)
        if value:
            return name, Secret(value)
    return None
