"""Batch fault profiles (issue 13): parsed beside the live kinds, drawn from their own seeded
stream so turning them on leaves a seed's live fault sequence exactly as it was."""

from __future__ import annotations

import pytest

from providers.sim.faults import (
    LINE_KINDS,
    BatchFaultKind,
    FaultInjector,
    FaultKind,
    expected_failures,
    parse_faults,
)


def test_batch_kinds_and_settings_mix_with_a_named_profile() -> None:
    profile = parse_faults("flaky,batch_expire=0.2,batch_line_error=0.01,batch_seconds=3,"
                           "batch_create_delay_s=0.5")
    assert profile.rates[FaultKind.RATE_LIMIT] == 0.03  # flaky's, kept
    assert profile.batch_rates == {BatchFaultKind.EXPIRE: 0.2, BatchFaultKind.LINE_ERROR: 0.01}
    assert (profile.batch_seconds, profile.batch_create_delay_s) == (3.0, 0.5)
    assert parse_faults("none").batch_seconds == 2.0


@pytest.mark.parametrize("text", ["batch_expire=0.6,batch_invalid=0.6",
                                  "batch_line_error=0.6,server_error=0.6",
                                  "batch_expire=-0.1", "batch_seconds=-1"])
def test_impossible_batch_profiles_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_faults(text)


def test_an_unknown_kind_lists_the_batch_kinds_too() -> None:
    with pytest.raises(ValueError, match="batch_expire"):
        parse_faults("batch_explode=0.1")


def test_batch_draws_leave_the_live_sequence_of_a_seed_unchanged() -> None:
    plain = FaultInjector(parse_faults("hostile"), seed=4)
    batched = FaultInjector(parse_faults("hostile,batch_expire=0.3,batch_line_error=0.2"),
                            seed=4)
    live_plain = [plain.draw() for _ in range(300)]
    live_batched = []
    for _ in range(300):
        batched.draw_job()
        batched.draw_line()
        live_batched.append(batched.draw())
    assert live_batched == live_plain and any(live_plain)


def test_lines_draw_only_the_kinds_that_fit_in_a_result_file() -> None:
    transport = FaultInjector(parse_faults("connection_reset=0.5,slow=0.5"), seed=1)
    assert {transport.draw_line() for _ in range(200)} == {None}
    mixed = FaultInjector(parse_faults("batch_line_error=0.3,refusal=0.3,output_cap=0.4"), 2)
    drawn = {mixed.draw_line() for _ in range(400)}
    assert drawn == {BatchFaultKind.LINE_ERROR, FaultKind.REFUSAL, FaultKind.OUTPUT_CAP}
    assert set(LINE_KINDS) >= {k for k in drawn if isinstance(k, FaultKind)}
    jobs = FaultInjector(parse_faults("batch_invalid=1.0"), 3)
    assert {jobs.draw_job() for _ in range(20)} == {BatchFaultKind.INVALID}


def test_error_lines_are_expected_as_provider_errors() -> None:
    counts = {"fault.batch_line_error": 3, "fault.rate_limit": 2, "fault.batch_expire": 1}
    assert expected_failures(counts) == {"provider_error": 3, "rate_limit": 2}
