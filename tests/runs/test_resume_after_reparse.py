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
from typer.testing import CliRunner

from engine.scan import scan_attempts
from runs.cli import app
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
