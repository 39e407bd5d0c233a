"""The simulator's Groq daily request counter tells the truth: it resets when its day ends,
and its reset header says when that is (a stuck counter once stalled a rehearsal for good)."""

from __future__ import annotations

from providers.headers import parse_duration
from providers.sim.call import Finish, Reply
from providers.sim.wire_openai import GroqDialect, _go_duration


def reply() -> Reply:
    return Reply(text="{}", finish=Finish.STOP, tokens_in=10, tokens_out=2,
                 model_label="sim/coherent", request_id="r")


def test_the_day_counter_resets_when_the_advertised_reset_has_passed() -> None:
    # A fake clock: with a real 0.4 s day, a loaded machine could end the day between two
    # of the first three replies.
    now = [1000.0]
    groq = GroqDialect(day_limit=3, day_s=0.4, clock=lambda: now[0])
    seen = []
    for _ in range(3):
        seen.append(groq.headers(reply()))
        now[0] += 0.01
    assert [h["x-ratelimit-remaining-requests"] for h in seen] == ["2", "1", "0"]
    wait = parse_duration(seen[-1]["x-ratelimit-reset-requests"])
    assert wait is not None and 0 < wait <= 0.4
    now[0] += wait - 0.03  # the day has not ended yet: the counter holds
    assert groq.headers(reply())["x-ratelimit-remaining-requests"] == "0"
    now[0] += 0.05  # ... and has now
    assert groq.headers(reply())["x-ratelimit-remaining-requests"] == "2"


def test_durations_are_written_the_way_groq_writes_and_we_read_them() -> None:
    for seconds in (0.0, 7.66, 179.56, 3723.5, 86_399.99):
        text = _go_duration(seconds)
        parsed = parse_duration(text)
        assert parsed is not None and abs(parsed - seconds) < 0.006, text
    assert _go_duration(179.56) == "2m59.56s"


def test_the_default_allowance_does_not_stall_a_paper_scale_rehearsal() -> None:
    assert GroqDialect().day_limit >= 400_000  # the paper's workhorse asked 345,500 queries
