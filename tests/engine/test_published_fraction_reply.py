"""The family benchmark's fraction reply, exactly as it quotes it.

/work/shared/reference/family-benchmark.md lines 50-52: 'Several models answer dice
questions as fractions ("Probability: 11/36"); a naive parser read that as 0.11.'
`test_answers.py` reads 11/36 inside the JSON object the prompt asks for; this is the
quoted reply itself, which is no JSON object.
"""

from __future__ import annotations

import pytest

from engine.answers import AnswerError, parse_answer


@pytest.mark.parametrize("mode", ["strict", "lenient"])
@pytest.mark.parametrize("reply", ["Probability: 11/36", '{"probability": "11/36"}'])
def test_the_quoted_fraction_is_never_read_as_0_11(mode: str, reply: str) -> None:
    """Each parser either reads 11/36 exactly or rejects the reply (kept for a re-parse);
    neither reads 0.11. The quoted text, no JSON object, is rejected as not_json by both."""
    try:
        value = parse_answer(reply, ("probability",), mode)["probability"]
    except AnswerError as error:
        assert reply.startswith("{") or error.subcause == "not_json"
        return
    assert value == 11 / 36
