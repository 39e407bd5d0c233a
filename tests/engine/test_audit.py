"""`engine.audit`: the one definition of a retry, checked against a plain-Python count."""

from __future__ import annotations

import functools
import math
import operator
import random
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import orjson
import polars as pl
import pytest

import engine.audit
from engine.audit import (
    CAUSES,
    PARTS,
    ROWS_PER_PART,
    attempt_timeline,
    audit,
    by_cause,
    paper_causes,
    paper_causes_sentence,
    parts_for,
    retry_sentence,
)
from engine.durable import append_record_line
from engine.ledger import Ledger
from engine.reparse import REPARSES_FILE
from engine.retry import DUPLICATE_REFUSED
from engine.spend import Prices
from runs.audit import AUDIT_JSON
from runs.audit import write_files as write_audit_files

if TYPE_CHECKING:
    from tests.engine.conftest import Kit

# (request, attempt, outcome, detail, latency ms, answer recorded with it)
_ALPHA = [  # groq: accepted after two rate limits and a 5xx; accepted at once; given up
    ("alpha-0", 1, "rate_limit", "", 5.0, False),
    ("alpha-0", 2, "rate_limit", "", 5.0, False),
    ("alpha-0", 3, "provider_error", "", 5.0, False),
    ("alpha-0", 4, "ok", "", 100.0, True),
    ("alpha-1", 1, "ok", "", 300.0, True),
    ("alpha-2", 1, "timeout", "", 5.0, False),
    ("alpha-2", 2, "interrupted", "", 5.0, False),
]
_BETA = [  # bedrock: a parser rejection then accepted; a malformed reply given up; two auth
    # errors (permanent); an answer accepted, then the same request answered again
    ("beta-0", 1, "invalid_response", "not_a_number: 'x'", 5.0, False),
    ("beta-0", 2, "ok", "", 20.0, True),
    ("beta-1", 1, "invalid_response", "reply has no choices", 5.0, False),
    ("beta-2", 1, "auth_error", "", 5.0, False),
    ("beta-2", 2, "auth_error", "", 5.0, False),
    ("beta-3", 1, "ok", "", 40.0, True),
    ("beta-3", 2, "ok", "", 50.0, True),  # the ledger refuses this second acceptance
]


def _scenario(ledger: Ledger, kit: type[Kit]) -> None:
    for model, provider, rows in (("alpha", "groq", _ALPHA), ("beta", "bedrock", _BETA)):
        for rid, n, outcome, detail, ms, answer in rows:
            attempt = kit.attempt(rid, n, model, outcome, detail, provider=provider, elapsed=ms)
            ledger.record_result(attempt, kit.response(rid, n, model) if answer else None)


def test_every_attempt_not_accepted_is_one_retry_attempt(tmp_path: Path, kit: type[Kit]) -> None:
    kit.id_plan(tmp_path, {"alpha": 4, "beta": 4})
    with Ledger.open(tmp_path) as ledger:
        _scenario(ledger, kit)
        live = audit(tmp_path)  # journal only, read while the writer holds the ledger
    done = audit(tmp_path)  # compacted into shards
    for report in (live, done):
        alpha, beta, total = report.by_model["alpha"], report.by_model["beta"], report.totals
        assert (alpha.requests, alpha.accepted, alpha.attempts) == (4, 2, 7)
        assert alpha.retry_attempts == 5 and alpha.requests_retried == 2
        assert {k: v for k, v in alpha.retries_by_cause.items() if v} == {
            "rate_limit": 2, "provider_error": 1, "timeout": 1, "interrupted": 1,
        }
        assert {k: v for k, v in alpha.given_up.items() if v} == {"interrupted": 1}
        assert alpha.not_attempted == 1
        assert (beta.requests, beta.accepted, beta.attempts) == (4, 2, 7)
        assert beta.retry_attempts == 5 and beta.requests_retried == 4
        assert {k: v for k, v in beta.retries_by_cause.items() if v} == {
            "invalid_response": 2, "auth_error": 2, "duplicate": 1,
        }
        assert {k: v for k, v in beta.invalid_response_subcauses.items() if v} == {
            "not_a_number": 1, "malformed_reply": 1,
        }
        assert {k: v for k, v in beta.given_up.items() if v} == {
            "invalid_response": 1, "auth_error": 1,
        }
        assert total.retry_attempts == 10 and total.requests_retried == 6
        assert total.requests == 8 and total.accepted == 4 and total.attempts == 14
        assert list(total.retries_by_cause) == list(CAUSES)
        assert report.providers == {"alpha": "groq", "beta": "bedrock"}
        assert report.by_provider["groq"].retries_by_cause == alpha.retries_by_cause
        assert report.by_provider["bedrock"].given_up == beta.given_up
        assert alpha.latency_ms["p50"] == pytest.approx(200.0)  # accepted: 100 and 300 ms
        assert total.latency_ms["p50"] == pytest.approx(np.percentile([100, 300, 20, 40], 50))
        assert total.tokens_in == 14 * 50 and total.cost_usd is None
    # largest first; ties in the table's cause order
    assert done.sentence == (
        "10 retry attempts across 6 requests out of 8, attributed to rate limits (2), "
        "invalid responses (2), authentication errors (2), provider errors (1), timeouts (1), "
        "interrupted dispatches (1), and duplicate answers (1). As Appendix C groups them: "
        "provider/response errors (3), rate limits (2), interrupted dispatches (1), and "
        "timeouts (1); besides those six causes, authentication errors (2) and duplicate "
        "answers (1)."
    )
    # All six of Appendix C, 0 where none happened (a reader tells "counted, none" from "not
    # counted"); a cause of no group only where it happened.
    assert done.totals.to_dict()["retries_by_paper_cause"] == {
        "provider/response errors": 3, "rate limits": 2, "authentication errors": 2,
        "interrupted dispatches": 1, "timeouts": 1, "duplicate answers": 1,
        "connection errors": 0, "missing routing metadata": 0,
    }  # fmt: skip
    assert list(done.totals.to_dict()["retries_by_paper_cause"])[-2:] == [
        "connection errors", "missing routing metadata",
    ]  # fmt: skip
    per_model: Counter[str] = Counter()
    for row in done.by_model.values():
        per_model.update(row.to_dict()["retries_by_paper_cause"])
    assert per_model == Counter(done.totals.to_dict()["retries_by_paper_cause"])


def test_accepted_attempt_is_the_one_the_response_names(tmp_path: Path, kit: type[Kit]) -> None:
    """After a lenient re-parse accepted a reply recorded `invalid_response`, that attempt is
    not a retry; the later `ok` becomes a duplicate. A reply recorded `ok` that the current
    parser rejects (no response row, after a strict reparse) is rejected on re-parse: not a
    retry attempt (it was counted one, an invalid response, and its request given up, though
    the run had accepted it and asked nothing more)."""
    with Ledger.open(tmp_path) as ledger:
        ledger.record_result(
            kit.attempt("r-0", 1, "m", "invalid_response", "not_json: 11/36"),
            kit.response("r-0", 1, "m"),
        )
        ledger.record_result(kit.attempt("r-0", 2, "m", "ok"), None)
        ledger.record_result(kit.attempt("r-1", 1, "m", "ok"), None)
    # With no reparse since, r-1's answer is not rejected but lost from responses/.
    lost = audit(tmp_path, spec_parser="lenient").by_model["m"]
    assert lost.retry_attempts == 1 and lost.answers_missing == 1
    assert lost.invalid_response_subcauses["rejected_on_reparse"] == 0
    assert sum(lost.given_up.values()) == 0
    append_record_line(tmp_path / REPARSES_FILE, {"at": "2026-12-01", "parser": "strict"})
    assert audit(tmp_path, spec_parser="strict").by_model["m"].answers_missing == 1
    report = audit(tmp_path, spec_parser="lenient").by_model["m"]
    assert report.answers_missing == 0
    assert report.accepted == 1 and report.attempts == 3 and report.retry_attempts == 1
    assert report.retries_by_cause["duplicate"] == 1 and report.requests_retried == 1
    assert report.retries_by_cause["invalid_response"] == 0
    assert report.invalid_response_subcauses["rejected_on_reparse"] == 0  # kept, always 0
    assert report.answers_rejected_on_reparse == 1 and sum(report.given_up.values()) == 0
    assert report.requests == 2  # no plan: the requests the ledger has seen
    assert report.sentence() == (
        "1 retry attempt across 1 request out of 2, attributed to duplicate answers (1); "
        "1 reply the run accepted was rejected by `dutchbook reparse --parser strict`, not "
        "retried."
    )


def test_a_lenient_reparse_leaves_the_runs_verdicts_on_the_attempts_after_its_answer(
    tmp_path: Path, kit: type[Kit]
) -> None:
    """The contract, not a change: a strict run re-asked r-0 twice for replies in fractions
    and accepted its third; a lenient reparse took the first. The second, which lenient
    takes too, stays the `invalid_response` the run recorded (the run did ask again for it:
    `attempts/` is history, a reparse rebuilds the answers), the third a `duplicate`."""
    with Ledger.open(tmp_path) as ledger:
        ledger.record_result(
            kit.attempt("r-0", 1, "m", "invalid_response", "not_json: 11/36"),
            kit.response("r-0", 1, "m"),
        )
        ledger.record_result(kit.attempt("r-0", 2, "m", "invalid_response", "not_json: 5/9"), None)
        ledger.record_result(kit.attempt("r-0", 3, "m", "ok"), None)
    append_record_line(tmp_path / REPARSES_FILE, {"at": "2026-12-01", "parser": "lenient"})
    report = audit(tmp_path, spec_parser="strict").by_model["m"]
    assert report.accepted == 1 and report.requests_retried == 1
    assert {k: v for k, v in report.retries_by_cause.items() if v} == {
        "invalid_response": 1, "duplicate": 1,
    }
    assert {k: v for k, v in report.invalid_response_subcauses.items() if v} == {"not_json": 1}


def test_a_duplicate_after_a_reply_a_strict_reparse_rejected_stays_a_retry(
    tmp_path: Path, kit: type[Kit]
) -> None:
    """Attempt 1 accepted, attempt 2 a valid reply refused as a duplicate (recorded `ok`):
    after a strict reparse rejected the reply, both were taken as the one the run accepted,
    and the duplicate retry the audit and status counted before ("1 retry attempt ...
    duplicate answers (1)") was gone ("No retry attempts"). Only the first `ok` attempt is
    the reply the run accepted; the later one stays a duplicate."""
    from engine.status import status

    with Ledger.open(tmp_path) as ledger:
        ledger.record_result(kit.attempt("r-0", 1, "m", "ok"), None)
        ledger.record_result(kit.attempt("r-0", 2, "m", "ok"), None)
    append_record_line(tmp_path / REPARSES_FILE, {"at": "2026-12-01", "parser": "strict"})
    report = audit(tmp_path, spec_parser="lenient").by_model["m"]
    assert report.answers_missing == 0 and report.answers_rejected_on_reparse == 1
    assert report.retry_attempts == 1 and report.requests_retried == 1
    assert {k: v for k, v in report.retries_by_cause.items() if v} == {"duplicate": 1}
    assert sum(report.given_up.values()) == 0 and report.requests == 1
    sentence = (
        "1 retry attempt across 1 request out of 1, attributed to duplicate answers (1); "
        "1 reply the run accepted was rejected by `dutchbook reparse --parser strict`, not "
        "retried."
    )
    assert report.sentence() == sentence
    summary = status(tmp_path, spec_parser="lenient")
    assert summary["retries_by_cause"] == {"duplicate": 1}
    assert summary["answers_rejected_on_reparse"] == 1 and summary["sentence"] == sentence


def test_a_reply_a_reparse_rejected_and_a_resume_asked_again_is_no_duplicate(
    tmp_path: Path, kit: type[Kit]
) -> None:
    """r-0's reply, accepted by the run, rejected by a reparse with the run's own parser (a
    reply edited in `attempts/`); a resume asked r-0 again and accepted attempt 2. The audit,
    `status` and figure 8 counted attempt 1 a `duplicate` retry attempt: it is an invalid
    response of the subcause `rejected_on_reparse`. r-1 and r-2 hold real duplicates, one
    refused after the answer (attempt 2) and one, a batch line collected late, refused though
    its attempt (1) came before the accepted one (2): they stay duplicates."""
    from engine.status import status

    with Ledger.open(tmp_path) as ledger:
        ledger.record_result(kit.attempt("r-0", 1, "m", "ok"), None)  # its answer reparsed away
        ledger.record_result(kit.attempt("r-0", 2, "m", "ok"), kit.response("r-0", 2, "m"))
        ledger.record_result(kit.attempt("r-1", 1, "m", "ok"), kit.response("r-1", 1, "m"))
        ledger.record_result(kit.attempt("r-1", 2, "m", "ok"), kit.response("r-1", 2, "m"))
        ledger.record_result(kit.attempt("r-2", 2, "m", "ok"), kit.response("r-2", 2, "m"))
        ledger.record_result(kit.attempt("r-2", 1, "m", "ok"), kit.response("r-2", 1, "m"))
    append_record_line(tmp_path / REPARSES_FILE, {"at": "2026-12-01", "parser": "strict"})
    report = audit(tmp_path, spec_parser="strict").by_model["m"]
    assert {k: v for k, v in report.retries_by_cause.items() if v} == {
        "invalid_response": 1, "duplicate": 2,
    }
    assert {k: v for k, v in report.invalid_response_subcauses.items() if v} == {
        "rejected_on_reparse": 1,
    }
    assert report.accepted == 3 and report.requests_retried == 3
    assert report.answers_rejected_on_reparse == 0 and report.answers_missing == 0
    summary = status(tmp_path, spec_parser="strict")
    assert summary["retries_by_cause"] == {"invalid_response": 1, "duplicate": 2}
    assert summary["duplicate_ok_attempts"] == 2 and summary["pending_failures"]["total"] == 0
    drawn = attempt_timeline(tmp_path, bins=1).group_by("outcome").agg(pl.col("attempts").sum())
    assert dict(drawn.iter_rows()) == {"accepted": 3, "invalid_response": 1, "duplicate": 2}


def test_a_reply_a_reparse_rejected_then_asked_again_in_vain_is_a_retry(
    tmp_path: Path, kit: type[Kit]
) -> None:
    """m-0's reply, accepted by the run, rejected by a reparse with the run's own parser; a
    resume asked m-0 again twice, and both attempts failed. Its reply read as "rejected on
    reparse", no retry, and m-0 as not given up, though it was asked again: the reply is an
    invalid response of the subcause `rejected_on_reparse`, and m-0 is given up as its last
    attempt says. m-1's rejected reply was asked nothing more; m-2's came with a duplicate
    the ledger refused (a batch line collected late), no resume's asking: both stay
    rejected on reparse."""
    from engine.status import status

    with Ledger.open(tmp_path) as ledger:
        ledger.record_result(kit.attempt("m-0", 1, "m", "ok"), None)  # its answer reparsed away
        ledger.record_result(kit.attempt("m-0", 2, "m", "provider_error"), None)
        ledger.record_result(kit.attempt("m-0", 3, "m", "provider_error"), None)
        ledger.record_result(kit.attempt("m-1", 1, "m", "ok"), None)
        ledger.record_result(kit.attempt("m-2", 1, "m", "ok"), None)
        ledger.record_result(kit.attempt("m-2", 2, "m", "ok", DUPLICATE_REFUSED), None)
    pl.DataFrame(  # the plan's keys, by which the finished reparse's parser reads the replies
        {"request_id": ["m-0", "m-1", "m-2"], "model": "m", "keys": [["probability"]] * 3}
    ).write_parquet(tmp_path / "plan.parquet")
    append_record_line(tmp_path / REPARSES_FILE, {"at": "2026-12-01", "parser": "strict"})
    report = audit(tmp_path, spec_parser="strict").by_model["m"]
    assert {k: v for k, v in report.retries_by_cause.items() if v} == {
        "invalid_response": 1, "provider_error": 2, "duplicate": 1,
    }
    assert {k: v for k, v in report.invalid_response_subcauses.items() if v} == {
        "rejected_on_reparse": 1,
    }
    assert report.answers_rejected_on_reparse == 2 and report.requests_retried == 2
    assert {k: v for k, v in report.given_up.items() if v} == {"provider_error": 1}
    summary = status(tmp_path, spec_parser="strict")
    assert summary["retries_by_cause"] == {
        "duplicate": 1, "invalid_response": 1, "provider_error": 2,
    }
    assert summary["answers_rejected_on_reparse"] == 2
    drawn = attempt_timeline(tmp_path, bins=1).group_by("outcome").agg(pl.col("attempts").sum())
    assert dict(drawn.iter_rows()) == {
        "rejected_on_reparse": 2, "invalid_response": 1, "provider_error": 2, "duplicate": 1,
    }


@pytest.mark.parametrize(
    ("flags", "reply_b"),
    [
        ({"ok_means_accepted": True}, (True, None, False, True)),  # its answer was lost
        ({}, (False, None, True, False)),  # a stricter reparse rejected it
        ({"rejected_possible": False}, (False, "duplicate", False, False)),  # as documented
        # A stricter reparse may have rejected it, but b's answer was lost all the same.
        ({"lost": pl.LazyFrame({"request_id": ["b"]})}, (True, None, False, True)),
        ({"lost": pl.LazyFrame({"request_id": ["c"]})}, (False, None, True, False)),
    ],
)
def test_classify_reads_an_ok_reply_without_its_answer_as_its_flags_say(
    flags: dict[str, Any], reply_b: tuple[bool, str | None, bool, bool]
) -> None:
    """Request a has its answer; b's only reply, recorded `ok`, has none: lost (the reply is
    the accepted one, its answer missing), rejected by a stricter reparse (no retry), or,
    with `rejected_possible=False` (no such reply searched for), read as a duplicate; with
    `lost` naming b (`engine.reparse.lost_after_reparse`), lost though a stricter reparse
    may have rejected such replies."""
    from engine.audit import classify

    attempts = pl.LazyFrame(
        {"request_id": ["a", "b"], "attempt": [1, 1], "outcome": ["ok", "ok"], "detail": ["", ""]}
    )
    responses = pl.LazyFrame({"request_id": ["a"], "attempts": [1]})
    marked = classify(attempts, responses, **flags).sort("request_id").collect()
    columns = ("accepted", "cause", "rejected_on_reparse", "answer_missing")
    assert marked.select(columns).row(0) == (True, None, False, False)
    assert marked.select(columns).row(1) == reply_b


@pytest.fixture(params=["one part", "four parts"])
def parts(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """A test's small ledger audited in one part, as such a ledger is, and in `PARTS` (as a
    ledger of more than 3 * `ROWS_PER_PART` attempts is)."""
    if request.param == "four parts":
        monkeypatch.setattr(engine.audit, "ROWS_PER_PART", 1)
    return str(request.param)


def test_random_ledgers_match_a_plain_count(tmp_path: Path, kit: type[Kit], parts: str) -> None:
    rng = random.Random(3)
    outcomes = ["rate_limit", "provider_error", "timeout", "connection_error", "refusal"]
    expected_causes: Counter[str] = Counter()
    expected_given_up: Counter[str] = Counter()
    retried, latencies, attempts_n = set(), [], 0
    prices = {"m0": Prices(1.0, 2.0)}
    with Ledger.open(tmp_path) as ledger:
        for r in range(300):
            model = f"m{r % 3}"
            rid = f"r{r}"
            tries = rng.randint(1, 4)
            answered = rng.random() < 0.8
            for n in range(1, tries + 1):
                attempts_n += 1
                last = n == tries
                if last and answered:
                    ms = rng.uniform(1, 1000)
                    latencies.append(ms)
                    ledger.record_result(
                        kit.attempt(rid, n, model, "ok", elapsed=ms), kit.response(rid, n, model)
                    )
                else:
                    outcome = rng.choice(outcomes)
                    expected_causes[outcome] += 1
                    retried.add(rid)
                    if last:
                        expected_given_up[outcome] += 1
                    ledger.record_result(kit.attempt(rid, n, model, outcome), None)
            if r % 50 == 0:
                ledger.compact()
    report = audit(tmp_path, prices=prices)
    total = report.totals
    assert total.attempts == attempts_n
    assert total.retry_attempts == sum(expected_causes.values())
    assert {k: v for k, v in total.retries_by_cause.items() if v} == dict(expected_causes)
    assert {k: v for k, v in total.given_up.items() if v} == dict(expected_given_up)
    assert total.requests_retried == len(retried)
    for name, q in (("p50", 50), ("p95", 95), ("p99", 99)):
        assert total.latency_ms[name] == pytest.approx(np.percentile(latencies, q), abs=1e-3)
    m0 = report.by_model["m0"]
    assert m0.cost_usd == pytest.approx((m0.tokens_in * 1.0 + m0.tokens_out * 2.0) / 1e6)
    assert report.by_model["m1"].cost_usd is None
    assert total.cost_usd == pytest.approx(m0.cost_usd)
    assert sum(r.retry_attempts for r in report.by_model.values()) == total.retry_attempts
    table = report.table()
    assert table.filter(pl.col("scope") == "all")["retry_attempts"].item() == total.retry_attempts


#: Four models' prices (per million tokens in) whose costs, 50 tokens each, a plain sum
#: adds to 1.6070000000000002 in some orders and 1.6069999999999998 in others, and never to
#: their correctly rounded total, 1.607.
_ORDER_SENSITIVE_PRICES = (11190.0, 5020.0, 5630.0, 10300.0)


def test_the_total_cost_does_not_depend_on_the_order_of_the_models(
    tmp_path: Path, kit: type[Kit]
) -> None:
    """`report/audit.json` said 1.38044028 and `dutchbook audit --json` 1.3804402800000002
    for one folder: the models' costs were added in the order a `group_by` gave them."""
    prices = {f"m{i}": Prices(p, 0.0) for i, p in enumerate(_ORDER_SENSITIVE_PRICES)}
    with Ledger.open(tmp_path) as ledger:
        for model in prices:
            ledger.record_result(kit.attempt(f"{model}-0", 1, model, "ok"),
                                 kit.response(f"{model}-0", 1, model))  # fmt: skip
    first = audit(tmp_path, prices=prices)
    costs = [first.by_model[m].cost_usd or 0.0 for m in sorted(prices)]
    plain = {functools.reduce(operator.add, order) for order in (costs, costs[::-1])}
    assert len(plain) == 2  # the order matters to a plain sum (`sum` compensates, 3.12 on)
    write_audit_files(tmp_path, first)  # report/audit.json, as `report` writes it
    written = tmp_path / AUDIT_JSON
    for _ in range(8):
        again = audit(tmp_path, prices=prices).to_dict()  # `dutchbook audit --json`'s object
        assert again["totals"]["cost_usd"] == math.fsum(costs) == 1.607
        assert orjson.loads(written.read_bytes()) == orjson.loads(orjson.dumps(again))


def test_the_papers_grouping_of_causes() -> None:
    """Appendix C's "provider/response errors (2,268)" hold every unusable reply, which the
    ledger tells apart: grouped, the paper's figures come back, the others said apart."""
    fine = {
        "rate_limit": 2459, "provider_error": 2000, "invalid_response": 200, "refusal": 50,
        "truncated": 17, "damaged_batch_result": 1, "interrupted": 7, "connection_error": 5,
        "timeout": 4, "missing_routing_metadata": 1, "duplicate": 0,
    }  # fmt: skip
    assert paper_causes(fine) == {
        "rate limits": 2459, "provider/response errors": 2268, "interrupted dispatches": 7,
        "connection errors": 5, "timeouts": 4, "missing routing metadata": 1,
    }  # fmt: skip
    assert paper_causes_sentence(fine) == (
        "As Appendix C groups them: rate limits (2,459), provider/response errors (2,268), "
        "interrupted dispatches (7), connection errors (5), timeouts (4), and missing routing "
        "metadata (1)."
    )
    assert paper_causes_sentence({**fine, "auth_error": 3, "duplicate": 1}) == (
        "As Appendix C groups them: rate limits (2,459), provider/response errors (2,268), "
        "interrupted dispatches (7), connection errors (5), timeouts (4), and missing routing "
        "metadata (1); besides those six causes, authentication errors (3) and duplicate "
        "answers (1)."
    )
    assert paper_causes({"rate_limit": 1, "bad_request": 0}) == {
        "rate limits": 1, "provider/response errors": 0, "interrupted dispatches": 0,
        "connection errors": 0, "timeouts": 0, "missing routing metadata": 0,
    }  # fmt: skip
    # only renamed: the sentence by cause already says it
    assert paper_causes_sentence({"rate_limit": 2, "provider_error": 1}) is None
    assert paper_causes_sentence({}) is None


def test_sentence_form() -> None:
    assert retry_sentence(1, 1, 10, {"rate_limit": 1}) == (
        "1 retry attempt across 1 request out of 10, attributed to rate limits (1)."
    )
    assert retry_sentence(4744, 4114, 345_500, {
        "rate_limit": 2459, "provider_error": 2268, "interrupted": 7, "connection_error": 5,
        "timeout": 4, "missing_routing_metadata": 1, "refusal": 0,
    }) == (
        "4,744 retry attempts across 4,114 requests out of 345,500, attributed to rate limits "
        "(2,459), provider errors (2,268), interrupted dispatches (7), connection errors (5), "
        "timeouts (4), and missing routing metadata (1)."
    )
    assert retry_sentence(3, 2, 5, {"timeout": 2, "refusal": 1}).endswith(
        "timeouts (2) and refusals (1)."
    )
    assert retry_sentence(0, 0, 7, {}) == (
        "No retry attempts: every attempt was accepted (7 requests)."
    )
    assert retry_sentence(0, 0, 7, {}, attempted=7) == retry_sentence(0, 0, 7, {})


def test_sentence_of_a_run_stopped_part_way_says_how_many_were_asked() -> None:
    """It read "(465,000 requests)" for a run stopped after 7,061: as if all were asked."""
    assert retry_sentence(0, 0, 465_000, {}, attempted=7_061) == (
        "No retry attempts: every attempt was accepted (7,061 of 465,000 requests attempted "
        "so far)."
    )
    # With retries the paper's form already says "out of" the planned requests.
    assert retry_sentence(2, 1, 10, {"timeout": 2}, attempted=3) == (
        "2 retry attempts across 1 request out of 10, attributed to timeouts (2)."
    )


def test_audit_and_status_of_a_part_answered_plan_say_so(tmp_path: Path, kit: type[Kit]) -> None:
    from engine.status import status as run_status

    kit.id_plan(tmp_path, {"alpha": 5})
    with Ledger.open(tmp_path) as ledger:
        for rid in ("alpha-0", "alpha-1"):
            attempt = kit.attempt(rid, 1, "alpha", "ok", "", provider="groq", elapsed=5.0)
            ledger.record_result(attempt, kit.response(rid, 1, "alpha"))
    expected = (
        "No retry attempts: every attempt was accepted (2 of 5 requests attempted so far)."
    )
    assert audit(tmp_path).totals.sentence() == expected
    assert run_status(tmp_path)["sentence"] == expected


@pytest.mark.parametrize(
    ("state", "reason", "lead", "said"),
    [
        ("stopped", "connection refused by http://h/v1: is the server running?",
         "alpha (groq): ",
         "its lane stopped (connection refused by http://h/v1: is the server running?)."),
        ("stopped", "after 3 auth_error failures in a row (HTTP 401): no",
         "alpha (groq) stopped ",
         "its lane stopped after 3 auth_error failures in a row (HTTP 401): no."),
        ("paused", "quota exhausted, lane paused until a later resume: daily", "alpha (groq): ",
         "its lane paused (quota exhausted, lane paused until a later resume: daily)."),
        ("cancelled", "stop requested", "", "its lane was stopped (stop requested)."),
    ],
    ids=["unreachable", "permanent", "quota", "stop"],
)
def test_a_lane_that_ended_early_is_named_with_why_and_what_is_left(
    tmp_path: Path, kit: type[Kit], state: str, reason: str, lead: str, said: str
) -> None:
    """The report, `audit` and `audit --json` say which lane ended its dispatch early, why,
    and how many of its requests are unanswered (`logs/lanes.json`); a lane that finished,
    or one that ended early with nothing left, is not named."""
    from engine.lanefile import write_lane_states
    from engine.lanes import LaneState, LaneStats

    kit.id_plan(tmp_path, {"alpha": 5, "beta": 2})
    with Ledger.open(tmp_path) as ledger:
        for model, rids in (("alpha", ("alpha-0", "alpha-1")), ("beta", ("beta-0", "beta-1"))):
            for rid in rids:
                attempt = kit.attempt(rid, 1, model, "ok", "", provider="groq", elapsed=5.0)
                ledger.record_result(attempt, kit.response(rid, 1, model))
    assert audit(tmp_path).notes() == []  # no dispatch recorded its lanes: nothing to say
    alpha = LaneStats("alpha", "groq", state=LaneState(state))
    alpha.say(reason, lead)
    beta = LaneStats("beta", "groq", state=LaneState.CANCELLED)
    beta.say("stop requested")
    gamma = LaneStats("gamma", "groq", state=LaneState.STOPPED)
    gamma.say("not in the plan")
    write_lane_states(tmp_path, [alpha, beta, gamma])
    found = audit(tmp_path)
    assert found.notes() == [
        f"alpha (groq): 3 of 5 requests unanswered; {said}",
        "Running the same command again asks only the unanswered requests.",
    ]  # beta: every request answered; gamma: no request of its own in this folder
    assert [end["model"] for end in found.to_dict()["lanes_ended_early"]] == [
        "alpha", "beta", "gamma"
    ]
    write_lane_states(tmp_path, [LaneStats("alpha", "groq", state=LaneState.DONE)])
    assert audit(tmp_path).notes() == []


def test_a_lanes_file_from_before_lanes_kept_their_reason_shows_the_whole_message(
    tmp_path: Path, kit: type[Kit]
) -> None:
    """A `logs/lanes.json` without `reason` (written by an earlier version) loses nothing:
    the lane's whole message is shown, its name included."""
    kit.id_plan(tmp_path, {"alpha": 3})
    message = "alpha (groq): connection refused by http://h/v1"
    lanes = {"alpha": {"provider": "groq", "state": "stopped", "message": message}}
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "lanes.json").write_bytes(orjson.dumps({"lanes": lanes}))
    assert audit(tmp_path).notes()[0] == (
        f"alpha (groq): 3 of 3 requests unanswered; its lane stopped ({message})."
    )


def test_timeline_counts_every_attempt_once(tmp_path: Path, kit: type[Kit], parts: str) -> None:
    with Ledger.open(tmp_path) as ledger:
        _scenario(ledger, kit)
    frame = attempt_timeline(tmp_path, bins=4)
    assert frame["attempts"].sum() == 14
    assert set(frame["bin"]) <= {0, 1, 2, 3} and frame["bin"].max() == 3
    by_outcome = dict(frame.group_by("outcome").agg(pl.col("attempts").sum()).iter_rows())
    assert by_outcome["accepted"] == 4 and by_outcome["rate_limit"] == 2
    assert by_outcome["duplicate"] == 1
    assert (frame["end"] > frame["start"]).all()
    first = frame.filter(pl.col("bin") == 0)["start"].min()
    assert first == kit.T0 + timedelta(seconds=10)
    assert attempt_timeline(tmp_path, bins=1)["bin"].max() == 0


def test_empty_and_missing_folders(tmp_path: Path) -> None:
    assert attempt_timeline(tmp_path).is_empty()
    empty = audit(tmp_path)
    assert empty.totals.attempts == 0 and empty.by_model == {}
    with pytest.raises(FileNotFoundError):
        audit(tmp_path / "nope")



def test_damaged_batch_results_are_a_cause_of_their_own() -> None:
    """A batch line its job's damaged results lost (`damaged_batch_result`) is counted and
    named as its own cause, where the sentence read "damaged batch result (2)" by the
    outcome's own spelling and the table's causes left it out."""
    assert by_cause({})["damaged_batch_result"] == 0
    assert list(by_cause({"damaged_batch_result": 2})).index("damaged_batch_result") < list(
        by_cause({})
    ).index("invalid_response")
    assert retry_sentence(3, 3, 10, {"damaged_batch_result": 2, "timeout": 1}) == (
        "3 retry attempts across 3 requests out of 10, attributed to damaged batch results "
        "(2) and timeouts (1)."
    )


@pytest.mark.parametrize(
    ("rows", "expected"),
    [(0, 1), (1, 1), (46_500, 1), (ROWS_PER_PART, 1), (ROWS_PER_PART + 1, 2), (405_719, PARTS)],
)
def test_a_ledger_is_audited_in_parts_of_at_most_rows_per_part(rows: int, expected: int) -> None:
    """One pass over the shards per part: the benchmark's 46,500 attempts in one (four took
    twice the CPU), the paper scale's 405,719 in `PARTS` (its memory measured so)."""
    attempts = pl.LazyFrame({"request_id": [f"r{i}" for i in range(rows)]})
    assert parts_for(attempts) == expected


def test_requests_lost_twice_to_damaged_batch_results_are_given_up_for_good(
    tmp_path: Path, kit: type[Kit]
) -> None:
    """Counted apart from those a rerun asks again, and before a spent budget, as the lane
    rules: raising the budget asks no request lost for good. Status counts them alike."""
    from engine.status import status

    lost = ["damaged_batch_result"] * 2
    with Ledger.open(tmp_path) as ledger:
        for rid, outcomes in {
            "twice": lost, "once": lost[:1],
            "spent": ["invalid_response"] * 3, "both": ["invalid_response"] * 3 + lost,
        }.items():
            for n, outcome in enumerate(outcomes, 1):
                ledger.record_result(kit.attempt(rid, n, "m", outcome), None)
    report = audit(tmp_path, answer_budget=3)
    assert report.totals.given_up_total == 4
    assert (report.totals.lost_to_damage, report.totals.answer_budget_spent) == (2, 1)
    assert report.to_dict()["totals"]["lost_to_damage"] == 2
    assert report.table()["lost_to_damage"].to_list() == [2, 2, 2]
    assert ("m: 2 requests given up for good: damaged batch results lost their lines twice, "
            "each loss billed, and no run asks them again.") in report.notes()
    pending = status(tmp_path, answer_budget=3)["pending_failures"]
    assert (pending["lost_to_damage"], pending["answer_budget_spent"]) == (2, 1)


def test_the_reports_cause_tables_list_appendix_cs_six_causes_with_zeros(
    tmp_path: Path, kit: type[Kit]
) -> None:
    """A referee: the report's cause table kept the causes that happened only, so "no
    connection error" read the same as "connection errors not counted". The report (its
    Markdown and its page) and `dutchbook audit` add a table of Appendix C's six causes, each
    with 0 where none happened, and any other cause that happened."""
    from runs.audit import markdown, paper_cause_rows
    from runs.report_page import render_page

    kit.id_plan(tmp_path, {"alpha": 4, "beta": 4})
    with Ledger.open(tmp_path) as ledger:
        _scenario(ledger, kit)
    report = audit(tmp_path)
    header, cells = paper_cause_rows(report)
    assert header == ["cause (Appendix C)", "retry attempts", "share", "given up", "by model"]
    assert [row[:4] for row in cells] == [
        ["provider/response errors", "3", "30%", "1"],  # beta-1's malformed reply given up
        ["rate limits", "2", "20%", "0"],
        ["authentication errors", "2", "20%", "1"],
        ["interrupted dispatches", "1", "10%", "1"],
        ["timeouts", "1", "10%", "0"],
        ["duplicate answers", "1", "10%", "0"],
        ["connection errors", "0", "0%", "0"],
        ["missing routing metadata", "0", "0%", "0"],
    ]
    assert cells[0][4] == "beta 2, alpha 1" and cells[-1][4] == ""
    text = markdown(report)
    assert "| cause (Appendix C) |" in text and "| connection errors | 0 | 0% | 0 |  |" in text
    page = render_page({"rows": []}, [], tmp_path, audit_sentence=report.sentence,
                       audit_table=report.table(), audit_causes=(header, cells))  # fmt: skip
    assert "<td class=\"text key\">missing routing metadata</td><td>0</td>" in page
