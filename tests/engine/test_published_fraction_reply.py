"""The family benchmark's fraction reply, exactly as it quotes it.

../shared/reference/family-benchmark.md lines 50-52: 'Several models answer dice
questions as fractions ("Probability: 11/36"); a naive parser read that as 0.11.'
`test_answers.py` reads 11/36 inside the JSON object the prompt asks for; this is the
quoted reply itself, which is no JSON object.
"""

from __future__ import annotations

import pytest

from engine.answers import AnswerError, parse_answer


@pytest.mark.parametrize(
    ("mode", "reply", "read"),
    [
        ("strict", "Probability: 11/36", "not_json"),
        ("lenient", "Probability: 11/36", "not_json"),  # no JSON object: kept for a re-parse
        ("strict", '{"probability": "11/36"}', "not_a_number"),
        ("lenient", '{"probability": "11/36"}', 11 / 36),  # the fraction itself, not 0.11
    ],
)
def test_the_quoted_fraction_is_never_read_as_0_11(mode: str, reply: str, read: object) -> None:
    """Each parser reads 11/36 exactly or rejects the reply with its subcause (kept for a
    re-parse); neither reads 0.11."""
    if isinstance(read, float):
        assert parse_answer(reply, ("probability",), mode)["probability"] == read
        return
    with pytest.raises(AnswerError) as error:
        parse_answer(reply, ("probability",), mode)
    assert error.value.subcause == read
