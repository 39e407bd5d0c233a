"""A resume of a lenient spec's folder whose answers `dutchbook reparse` last read with strict
is refused before a request is sent; a strict spec's folder read by lenient resumes.

Found by a hostile tester: `reparse --parser strict` of a folder whose spec said lenient left
the requests strict rejected (a forecaster answering "11/36") without an answer, and the next
`dutchbook run` asked them all again, paying for replies the spec's parser had taken, read
the new ones with lenient (answers of two parsers in one folder) and left requests with two
accepted answers (hundreds of `duplicate answers` in the audit).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from engine.ledger import Ledger
from engine.reparse import LastReparse, last_reparse
from engine.reparse import reparse as engine_reparse
from engine.scan import scan_attempts, scan_responses
from runs.cli import app
from runs.report.provenance import parser_words, provenance
from tests.runs.run_folders import folder_contents

SPEC = """
name = "reparsed"
seed = 3
parser = "{parser}"
[data]
stock_days = 2
[[models]]
name = "fractions"
provider = "sim"
model = "sim-fraction"
[[arms]]
name = "baseline"
"""


def _invoke(*args: str) -> tuple[int, str]:
    done = CliRunner().invoke(app, list(args), env={"COLUMNS": "400"})
    return done.exit_code, done.output


def _accepted_twice(out: Path) -> int:
    """Requests with more than one attempt recorded `ok` (a duplicate paid for)."""
    ok = scan_attempts(out).filter(pl.col("outcome") == "ok").collect()
    return ok.group_by("request_id").len().filter(pl.col("len") > 1).height


def test_a_resume_after_a_reparse_to_another_parser_is_refused_until_reparsed_back(
    tmp_path: Path,
) -> None:
    spec = tmp_path / "s1.toml"
    spec.write_text(SPEC.format(parser="lenient"), encoding="utf-8")
    out = tmp_path / "rp"
    assert _invoke("run", str(spec), "--out", str(out))[0] == 0
    code, said = _invoke("reparse", str(out), "--parser", "strict")
    assert code == 0 and "accepted 28 → 0" in said, said
    attempts = scan_attempts(out).collect().height
    before = folder_contents(out, skip=frozenset({".lock", "run.pid"}))

    code, said = _invoke("run", str(spec), "--out", str(out))
    assert code == 2, said
    assert said == (
        f"error: {out}: its answers were last parsed with strict (dutchbook reparse), and this "
        "spec reads replies with lenient: resuming would ask again for the replies strict "
        f"rejected and mix two parsers' answers; run `dutchbook reparse {out} --parser "
        "lenient` first (no API call), then run again, or keep strict's answers without "
        f"resuming (`dutchbook score {out}`, then `dutchbook report {out}`)\n"
    )
    assert folder_contents(out, skip=frozenset({".lock", "run.pid"})) == before  # nothing sent

    # A spec of another design is refused for that first: a new folder, not a reparse, helps.
    other = tmp_path / "other.toml"
    other.write_text(SPEC.format(parser="lenient").replace("seed = 3", "seed = 4"), "utf-8")
    code, said = _invoke("run", str(other), "--out", str(out))
    assert code == 2 and "different design; changed: seed" in said, said

    assert _invoke("reparse", str(out), "--parser", "lenient")[0] == 0
    code, said = _invoke("run", str(spec), "--out", str(out))
    assert code == 0, said
    # The kept replies answer every request again: nothing asked, nothing accepted twice.
    assert scan_attempts(out).collect().height == attempts
    assert _accepted_twice(out) == 0


def test_a_strict_folder_read_by_lenient_resumes(tmp_path: Path) -> None:
    """A strict spec's folder read again by lenient (the closing line's advice for a model
    answering in fractions) resumes: what lenient rejected, strict rejects too, so nothing
    lenient took is asked again."""
    spec = tmp_path / "strict.toml"
    spec.write_text(SPEC.format(parser="strict"), encoding="utf-8")
    out = tmp_path / "run"
    assert _invoke("run", str(spec), "--out", str(out))[0] == 4  # every fraction rejected
    code, said = _invoke("reparse", str(out), "--parser", "lenient")
    assert code == 0 and "accepted 0 → 28" in said, said
    attempts = scan_attempts(out).collect().height
    code, said = _invoke("run", str(spec), "--out", str(out))
    assert code == 0, said
    assert scan_attempts(out).collect().height == attempts  # nothing asked again
    assert _accepted_twice(out) == 0


def test_a_reparse_killed_after_replacing_the_answers_still_stops_a_paying_resume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kill between the replacement of the answers and the line saying so left strict's
    answers with no word of them: the lenient resume then paid again for every reply strict
    rejected. The reparse now says what it is about to do first; the folder's parser is then
    unknown until the reparse is run again."""
    spec = tmp_path / "s1.toml"
    spec.write_text(SPEC.format(parser="lenient"), encoding="utf-8")
    out = tmp_path / "rp"
    assert _invoke("run", str(spec), "--out", str(out))[0] == 0
    replace = Ledger.replace_responses

    def replaced_then_killed(self: Ledger, frame: pl.DataFrame) -> Path:
        replace(self, frame)
        raise KeyboardInterrupt  # the kill: nothing after the replacement runs

    monkeypatch.setattr(Ledger, "replace_responses", replaced_then_killed)
    with pytest.raises(KeyboardInterrupt):
        engine_reparse(out, "strict")
    monkeypatch.undo()
    assert scan_responses(out).collect().height == 0  # strict's answers are the folder's
    assert last_reparse(out) == LastReparse("strict", last_reparse(out).at, finished=False)  # type: ignore[union-attr]
    attempts = scan_attempts(out).collect().height

    code, said = _invoke("run", str(spec), "--out", str(out))
    assert code == 2, said
    assert said.startswith(
        f"error: {out}: its answers may have been parsed with strict (a `dutchbook reparse "
        "--parser strict` begun at "
    ), said
    assert "did not finish), and this spec reads replies with lenient:" in said, said
    assert scan_attempts(out).collect().height == attempts  # nothing paid for again
    assert provenance(out)["parser"] == "unknown"
    assert provenance(out)["parser_from"].endswith("to strict did not finish; run it again")
    assert parser_words(provenance(out)).startswith("answers read by an unknown parser: ")

    assert _invoke("reparse", str(out), "--parser", "strict")[0] == 0  # run again: finished
    assert last_reparse(out).finished  # type: ignore[union-attr]
    assert provenance(out)["parser"] == "strict"
    code, said = _invoke("run", str(spec), "--out", str(out))
    assert code == 2 and "its answers were last parsed with strict" in said, said
