"""`dutchbook check`: the paper's Figure 1 end to end, both input forms, and every bad input."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import typer
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from runs.commands import check as check_module
from runs.commands.check import atom_payoffs, book_rows
from scoring.dutch_book import CERTIFY_TOLERANCE, ROUNDING_PROFIT

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
CONSOLE_SCRIPT = Path(sys.executable).parent / "dutchbook"


def _app() -> typer.Typer:
    """Just the check command, so these tests do not depend on the other commands."""
    app = typer.Typer(pretty_exceptions_enable=False)
    check_module.register(app)

    @app.callback()
    def _root() -> None:
        """dutchbook (test harness)."""

    return app


def _run(*args: str, input_text: str | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(_app(), ["check", *args], input=input_text)
    return result.exit_code, result.stdout, result.stderr


def _json(*args: str) -> dict[str, object]:
    code, out, err = _run(*args, "--json")
    assert code == 0, err
    return json.loads(out)  # type: ignore[no-any-return]


def test_a_set_no_solve_certifies_ends_in_one_line_exit_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A set no solve certifies (a tester's l1 set did, before dc4ff40) raised out of `check`
    as a traceback; it is one line, exit 1, naming the file and the gap, and no profit."""
    import scoring.dutch_book as dutch_book

    def uncertified(*_: object) -> object:
        raise dutch_book.UncertifiedError(
            "Dutch-book LP for set 0 could not be certified (duality gap 2.4e-06 > 1e-09)"
        )

    monkeypatch.setattr(dutch_book, "_solve_certified", uncertified)
    path = tmp_path / "set.json"
    path.write_text(json.dumps({"atoms": 2, "events": [
        {"id": "A", "atoms": [0], "p": 0.6}, {"id": "B", "atoms": [1], "p": 0.6},
    ]}))  # fmt: skip
    code, out, err = _run(str(path), "--norm", "l1")
    assert code == 1
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert str(path) in lines[0]
    assert "could not be certified (duality gap 2.4e-06 > 1e-09)" in lines[0]
    assert "please report it" in lines[0]


def test_a_contract_on_a_certain_event_priced_1_pays_plus_zero_not_minus_zero() -> None:
    """Selling a certain event at 1 pays -1 x (1 - 1) in every atom, -0.0, which the book's
    table printed as "-0.00000" (a tester's set)."""
    incidence = np.array([[1.0, 0.0], [1.0, 1.0]])
    probs = np.array([0.7, 1.0])
    _, rows = book_rows(incidence, probs, np.array([1.0, -1.0]))
    assert [payoff for i, payoff in rows if i == 1] == [0.0]
    assert all(np.copysign(1.0, payoff) == 1.0 for _, payoff in rows if payoff == 0)


def test_another_runtime_error_is_not_said_to_be_an_uncertified_profit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Only an UncertifiedError is said as one: the repair's QP failing (a RuntimeError too)
    was reported as a profit not certified, where the profit had been."""
    import scoring

    def failing(*_: object) -> object:
        raise RuntimeError("repair QP for set 0 is not optimal (violation 0.001)")

    monkeypatch.setattr(scoring, "repair", failing)
    with pytest.raises(RuntimeError, match="repair QP"):
        CliRunner().invoke(
            _app(), ["check", str(EXAMPLES / "figure1.toml"), "--repair"], catch_exceptions=False
        )


# -- the paper's example, through the installed console script ------------------------
@pytest.mark.skipif(not CONSOLE_SCRIPT.exists(), reason="console script not installed")
def test_figure_1_through_the_console_script() -> None:
    done = subprocess.run(
        [str(CONSOLE_SCRIPT), "check", str(EXAMPLES / "figure1.toml"), "--json"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)  # stdout is exactly one JSON object
    assert set(payload) == {"norm", "profit", "stakes", "coherent"}
    assert payload["norm"] == "inf"
    assert round(payload["profit"], 5) == 0.01113
    assert {k: round(v, 4) for k, v in payload["coherent"].items()} == {
        "4": 0.4111, "5": 0.8056, "7": 0.3944,
    }  # fmt: skip
    stakes = payload["stakes"]
    assert stakes["4"] == pytest.approx(1 / 3) and stakes["7"] == pytest.approx(1 / 3)
    assert stakes["5"] == pytest.approx(-1 / 3)

    shown = subprocess.run(
        [str(CONSOLE_SCRIPT), "check", str(EXAMPLES / "figure1.toml")],
        capture_output=True, text=True, timeout=120, check=False,
        env={"COLUMNS": "120", "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert "Dutch-book profit: 0.01113" in shown.stdout
    for row in ("buy", "sell", "0.3333", "0.4111", "0.8056", "0.3944", "+0.01113"):
        assert row in shown.stdout


def test_atoms_form_gives_the_same_answer_as_the_formula_form() -> None:
    by_formula = _json(str(EXAMPLES / "figure1.toml"))
    by_atoms = _json(str(EXAMPLES / "atoms.json"))
    assert by_atoms["profit"] == pytest.approx(by_formula["profit"], abs=1e-12)
    assert by_atoms["coherent"] == pytest.approx(by_formula["coherent"], abs=1e-9)


def test_l1_norm_and_repair() -> None:
    payload = _json(str(EXAMPLES / "conjunction.toml"), "--norm", "l1", "--repair")
    assert payload["norm"] == "l1"
    # P(A)+P(B) - P(A and B) - P(A or B) = -0.1: one of each contract earns 0.1
    assert payload["profit"] == pytest.approx(0.1, abs=1e-9)
    repaired = payload["repaired"]
    assert isinstance(repaired, dict)
    # the projection spreads the 0.1 gap evenly over the four events
    expected = {"A": 0.625, "B": 0.525, "A and B": 0.375, "A or B": 0.775}
    assert repaired == pytest.approx(expected, abs=1e-6)


def test_coherent_input_reports_no_book(tmp_path: Path) -> None:
    path = tmp_path / "ok.toml"
    path.write_text(
        'variables = ["a"]\n[[events]]\nid = "a"\nformula = "a"\np = 0.3\n'
        '[[events]]\nid = "not a"\nformula = "not a"\np = 0.7\n'
    )
    code, out, _ = _run(str(path))
    assert code == 0
    assert "profit: 0.00000" in out and "coherent" in out and "Dutch book (" not in out
    assert _json(str(path))["profit"] == pytest.approx(0.0, abs=1e-9)


def test_ids_that_differ_by_a_trailing_backslash_are_printed_as_written(tmp_path: Path) -> None:
    """`x\\` and `x\\\\` both printed `x\\\\` (markup's escape doubles a trailing backslash)."""
    path = tmp_path / "backslash.toml"
    path.write_text('atoms = 2\n[[events]]\nid = "x\\\\"\np = 0.5\natoms = [0]\n'
                    '[[events]]\nid = "x\\\\\\\\"\np = 0.6\natoms = [0]\n', encoding="utf-8")
    code, out, err = _run(str(path))
    assert code == 0, err
    rows = [line.split("│")[1].strip() for line in out.splitlines() if line.startswith("│ x")]
    assert rows == ["x\\", "x\\\\", "x\\", "x\\\\"], out  # the book's rows, then the forecast's


def test_human_output_shows_the_book_and_the_worst_atom() -> None:
    code, out, _ = _run(str(EXAMPLES / "conjunction.toml"), "--norm", "l1", "--repair")
    assert code == 0
    assert "payoff in worst atom" in out and "worst atom: a=F, b=F" in out
    assert "repaired" in out


# -- bad input: one line, non-zero exit, no traceback ----------------------------------
HEADER = 'variables = ["a", "b"]\n'


def _event(event_id: str, formula: str, p: str) -> str:
    return f'[[events]]\nid = "{event_id}"\nformula = "{formula}"\np = {p}\n'


BAD_INPUTS = {
    "p above 1": (HEADER + _event("x", "a", "1.2"), "p = 1.2 is outside [0, 1]"),
    "p below 0": (HEADER + _event("x", "a", "-0.1"), "outside [0, 1]"),
    "p nan": (HEADER + _event("x", "a", "nan"), "outside [0, 1]"),
    "p not a number": (HEADER + _event("x", "a", '"0.5"'), "'p' must be a number"),
    "duplicate ids": (HEADER + _event("x", "a", "0.5") + _event("x", "b", "0.5"),
                      "duplicate event id 'x'"),
    # printed alike in every table, scored as two events
    "one id in two Unicode forms": (
        HEADER + _event("caf\\u00e9", "a", "0.5") + _event("cafe\\u0301", "b", "0.5"),
        "event ids written 'caf\\xe9' and 'cafe\\u0301': one id in two Unicode forms"),
    "impossible event": (HEADER + _event("x", "a and not a", "0.5"),
                         "event 'x' holds in no atom"),
    "parse error": (HEADER + _event("x", "a and", "0.5"),
                    "event 'x': expected a variable, 'not' or '(' but found end of formula "
                    "at position 5"),
    # printed raw in every table: an escape sequence reached the terminal
    "id with an escape": (HEADER + _event("x\\u001b[31m", "a", "0.5"),
                          "event 1: 'id' must be one line without control characters"),
    "id with a line break": (HEADER + _event("x\\ny", "a", "0.5"),
                             "event 1: 'id' must be one line without control characters"),
    # "x" and "x" + U+200B were scored as two events and printed as one
    "id with a zero-width space": (
        HEADER + _event("x", "a", "0.5") + _event("x\\u200b", "b", "0.5"),
        "event 2: 'id' holds U+200B ZERO WIDTH SPACE"),
    "id with a direction override": (HEADER + _event("\\u202ex", "a", "0.5"),
                                     "event 1: 'id' holds U+202E RIGHT-TO-LEFT OVERRIDE"),
    "id with a trailing space": (HEADER + _event("x", "a", "0.5") + _event("x ", "b", "0.5"),
                                 "event 2: 'id' must have no leading or trailing spaces"),
    # printed whole in every table, as family ids were before they were capped
    "id of 101 characters": (HEADER + _event("x" * 101, "a", "0.5"),
                             "event 1: 'id' must be at most 100 characters, not 101"),
    "unknown variable": (HEADER + _event("x", "a or c", "0.5"),
                         "event 'x': unknown variable 'c' at position 5"),
    "unknown top-level key": (HEADER + "colour = 1\n" + _event("x", "a", "0.5"),
                              "unknown key 'colour' (this file's keys: constraints, events, "
                              "variables)"),
    "a campaign spec": ('name = "demo"\n[[models]]\nname = "m"\nprovider = "sim"\n'
                        '[[arms]]\nname = "baseline"\n',
                        "a campaign spec, not one set of probabilities: `dutchbook plan"),
    "unknown event key": (HEADER + _event("x", "a", "0.5") + "weight = 2\n",
                          "event 'x': unknown key 'weight'"),
    "missing p": (HEADER + '[[events]]\nid = "x"\nformula = "a"\n', "missing key 'p'"),
    "no events": (HEADER, "'events' must be a non-empty list"),
    "no world": (HEADER + 'constraints = ["a", "not a"]\n' + _event("x", "a", "0.5"),
                 "no possible world"),
    "bad constraint": (HEADER + 'constraints = ["a ->"]\n' + _event("x", "a", "0.5"),
                       "constraint 1:"),
    "both forms": (HEADER + "atoms = 3\n" + _event("x", "a", "0.5"), "not both"),
    "neither form": (_event("x", "a", "0.5"), "missing key 'variables'"),
    "invalid toml": ("variables = [\n", "not valid TOML"),
    "atoms: empty event": ('atoms = 3\n[[events]]\nid = "x"\natoms = []\np = 0.5\n',
                           "event 'x' holds in no atom"),
    "atoms: index out of range": ('atoms = 3\n[[events]]\nid = "x"\natoms = [3]\np = 0.5\n',
                                  "atom index 3 is not in 0..2"),
    "atoms: not a count": ('atoms = 0\n[[events]]\nid = "x"\natoms = [0]\np = 0.5\n',
                           "'atoms' must be a whole number from 1 to 1,000,000, not 0"),
    # Refused as "a positive whole number, not 1000001" before: the bound went unsaid.
    "atoms: too many": ('atoms = 1000001\n[[events]]\nid = "x"\natoms = [0]\np = 0.5\n',
                        "'atoms' must be a whole number from 1 to 1,000,000, not 1000001"),
    "atoms: formula key": ('atoms = 2\n[[events]]\nid = "x"\nformula = "a"\np = 0.5\n',
                           "unknown key 'formula'"),
}  # fmt: skip


def _propositional(variables: int, formulas: list[str]) -> str:
    names = ", ".join(f'"v{i}"' for i in range(variables))
    return f"variables = [{names}]\n" + "".join(
        _event(f"e{n}", formula, "0.5") for n, formula in enumerate(formulas)
    )


def _big_disjunctions(count: int) -> tuple[list[str], int]:
    """`count` different disjunctions of five of 17 variables (a fixed pseudo-random draw),
    and how many atoms they make: distinct columns of their truth table, counted here by
    as a set of each world's column of truth values, not by the code under test."""
    rng = np.random.default_rng(3)
    chosen = [rng.choice(17, 5, replace=False) for _ in range(count)]
    bits = (np.arange(2**17)[None, :] >> np.arange(16, -1, -1)[:, None]) & 1
    table = np.stack([bits[c].any(axis=0) for c in chosen])
    atoms = len({column.tobytes() for column in table.T})
    return [" or ".join(f"v{i}" for i in c) for c in chosen], atoms


_FORMULAS, _ATOMS = _big_disjunctions(300)


def _one_atom_events(atoms: int, events: int) -> str:
    """`atoms` atoms and `events` events, event n holding in atom n alone."""
    rows = "".join(f'[[events]]\nid = "e{n}"\natoms = [{n}]\np = 0.1\n' for n in range(events))
    return f"atoms = {atoms}\n" + rows


TOO_LARGE = {
    # 257 events over 2^20 worlds: refused before one truth value is computed.
    "truth values": (
        _propositional(20, ["v0"] * (2**28 // 2**20 + 1)),
        "257 formulas over 1,048,576 possible worlds are 269,484,032 truth values; check "
        "computes at most 268,435,456 (use fewer formulas or variables)",
    ),
    "atoms' truth values": (
        _one_atom_events(1_000_000, 269),
        "269 events over 1,000,000 atoms are 269,000,000 truth values",
    ),
    # 300 events whose worlds merge into about 76,000 atoms: one such LP ran to 3.6 GB, and
    # 300 such events over 2^20 worlds ran a 24 GB machine out of memory.
    "LP pairs": (
        _propositional(17, _FORMULAS),
        f"300 events over {_ATOMS:,} atoms are {300 * _ATOMS:,} event-atom pairs, more than "
        "check solves as one LP (20,000,000",
    ),
}


@pytest.mark.parametrize("case", [*BAD_INPUTS, *TOO_LARGE])
def test_bad_input_is_one_line_and_non_zero(tmp_path: Path, case: str) -> None:
    text, expected = {**BAD_INPUTS, **TOO_LARGE}[case]
    path = tmp_path / "input.toml"
    path.write_text(text)
    code, out, err = _run(str(path))
    assert code != 0
    assert out == ""
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith("error: ") and str(path) in err
    assert expected in err


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("missing.toml", None, "no such file"),
        ("bad.json", "{not json", "not valid JSON"),
        ("dupkey.json", '{"atoms": 2, "events": [{"id": "x", "atoms": [0], "p": 0.3, "p": 0.9}]}',
         "not valid JSON (the key 'p' twice in one object)"),
        ("dupkey2.json", '{"atoms": 2, "atoms": 3, "events": [{"id": "x", "atoms": [0], "p": 0}]}',
         "the key 'atoms' twice"),
        ("deep.json", '{"a": ' * 3000 + "1" + "}" * 3000, "not valid JSON"),
        ("list.json", "[1, 2]", "top level must be an object"),
        ("dup.json", '{"atoms": 2, "events": [{"id": "x", "atoms": [0], "p": 0.2},'
                     ' {"id": "x", "atoms": [1], "p": 0.2}]}', "duplicate event id 'x'"),
        ("p.json", '{"atoms": 2, "events": [{"id": "x", "atoms": [0], "p": 2}]}',
         "outside [0, 1]"),
    ],
)  # fmt: skip
def test_bad_files(tmp_path: Path, name: str, content: str | None, expected: str) -> None:
    path = tmp_path / name
    if content is not None:
        path.write_text(content)
    code, _, err = _run(str(path))
    assert code != 0 and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and expected in err


@pytest.mark.skipif(not CONSOLE_SCRIPT.exists(), reason="console script not installed")
def test_bad_input_through_the_console_script(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(HEADER + _event("x", "a", "1.5"))
    done = subprocess.run([str(CONSOLE_SCRIPT), "check", str(path)], capture_output=True,
                          text=True, timeout=120, check=False)  # fmt: skip
    assert done.returncode != 0 and done.stdout == ""
    assert done.stderr.strip().count("\n") == 0 and "outside [0, 1]" in done.stderr


# -- the Dutch-book table's arithmetic -------------------------------------------------
@given(
    st.integers(2, 5).flatmap(
        lambda m: st.tuples(
            st.lists(st.lists(st.integers(0, 1), min_size=m, max_size=m), min_size=1, max_size=5),
            st.lists(st.floats(0, 1), min_size=5, max_size=5),
            st.lists(st.floats(-1, 1), min_size=5, max_size=5),
        )
    )
)
def test_worst_atom_payoffs_add_up_to_the_book_total(
    case: tuple[list[list[int]], list[float], list[float]],
) -> None:
    rows, p, b = case
    incidence = np.array(rows, dtype=np.uint8)
    n = len(rows)
    probs, stakes = np.array(p[:n]), np.array(b[:n])
    worst, contracts = book_rows(incidence, probs, stakes)
    payoffs = atom_payoffs(incidence, probs, stakes)
    assert payoffs[worst] == pytest.approx(payoffs.min())
    assert sum(v for _, v in contracts) == pytest.approx(payoffs[worst], abs=1e-9)


def test_the_lp_limit_counts_atoms_not_worlds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Eight events over 2^20 worlds merge into 256 atoms: within a limit of 8 x 256 pairs,
    and refused one pair below it, in both forms of input."""
    path = tmp_path / "input.toml"
    path.write_text(_propositional(20, [f"v{i}" for i in range(8)]))
    monkeypatch.setattr(check_module, "MAX_LP_PAIRS", 8 * 256)
    code, out, _ = _run(str(path))
    assert code == 0 and " ".join(out.split()).startswith(  # as the console wraps it
        "8 events, 256 atoms (of 1,048,576 possible worlds; worlds no event tells apart are "
        "merged);"
    )
    monkeypatch.setattr(check_module, "MAX_LP_PAIRS", 8 * 256 - 1)
    code, _, err = _run(str(path))
    assert code == 2 and "8 events over 256 atoms are 2,048 event-atom pairs" in err
    atoms = tmp_path / "atoms.toml"
    atoms.write_text(_one_atom_events(5, 3))
    # Three events over four atoms (atoms 3 and 4 hold no event: one atom).
    monkeypatch.setattr(check_module, "MAX_LP_PAIRS", 3 * 4 - 1)
    code, _, err = _run(str(atoms))
    assert code == 2 and "3 events over 4 atoms are 12 event-atom pairs" in err
    monkeypatch.setattr(check_module, "MAX_LP_PAIRS", 3 * 4)
    code, out, _ = _run(str(atoms))
    assert code == 0 and " ".join(out.split()).startswith(
        "3 events, 4 atoms (of 5 given; atoms no event tells apart are merged);"
    )


@pytest.mark.parametrize(
    ("example", "counts"),
    [
        ("atoms.json", "3 atoms (of 4 given; atoms no event tells apart are merged)"),
        ("figure1.toml",
         "3 atoms (of 4 possible worlds; worlds no event tells apart are merged)"),
        ("conjunction.toml", "4 atoms"),  # none merged: as before
    ],
)
def test_merged_atoms_are_counted_with_what_the_file_gave(example: str, counts: str) -> None:
    """examples/atoms.json declares 4 atoms and read "3 events, 3 atoms", with no word of
    the two that no event tells apart, merged into one."""
    code, out, _ = _run(str(EXAMPLES / example))
    assert code == 0
    first = " ".join(out.split()).split("; norm")[0]  # the line as the console wraps it
    assert first.split(", ", 1)[1] == counts


def test_one_event_and_one_atom_read_in_the_singular(tmp_path: Path) -> None:
    path = tmp_path / "one.toml"
    path.write_text('atoms = 1\n[[events]]\nid = "x"\natoms = [0]\np = 1.0\n')
    code, out, _ = _run(str(path))
    assert code == 0 and out.startswith("1 event, 1 atom; norm inf")


def test_json_from_a_pipe_is_read_as_json(tmp_path: Path) -> None:
    """`dutchbook check <(cat atoms.json)` names `/dev/fd/63`, with no `.json`: it was read as
    TOML and refused ("not valid TOML"), though a pipe is read like a file. A name that says
    neither is JSON when it opens with `{`, which no TOML document does."""
    want = _json(str(EXAMPLES / "atoms.json"))
    unnamed = tmp_path / "forecasts"  # as a pipe's /dev/fd/N: no suffix
    unnamed.write_bytes(b"\n  " + (EXAMPLES / "atoms.json").read_bytes())
    assert _json(str(unnamed)) == want
    toml_unnamed = tmp_path / "figure1"
    toml_unnamed.write_bytes((EXAMPLES / "figure1.toml").read_bytes())
    assert _json(str(toml_unnamed)) == _json(str(EXAMPLES / "figure1.toml"))
    if Path("/dev/fd").is_dir():  # the pipe itself, as the shell hands it over
        done = subprocess.run(
            ["bash", "-c", f'"{sys.executable}" -m runs.cli check <(cat "{EXAMPLES}/atoms.json")'
             " --json"],
            capture_output=True, text=True, timeout=120, check=False, cwd=ROOT,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) == want


#: Stated probabilities of one atom's two events, 2.29e-11 apart (a tester's): in the l1 norm
#: the solver's book came back all 0.0, and check showed a table of its total row alone.
SAME_ATOM = ('{"atoms": 2, "events": [{"id": "E0", "atoms": [0], "p": 0.16941405554927097},'
             ' {"id": "E1", "atoms": [0], "p": 0.16941405552639846}]}')  # fmt: skip
#: 0.5 and 0.500000000002 over two atoms: a profit of exactly `ROUNDING_PROFIT` (1e-12) in the
#: inf norm, scored 0, and of 2e-12 in the l1 norm, above rounding and below the resolution.
EDGE = ('{"atoms": 2, "events": [{"id": "A", "atoms": [0], "p": 0.5},'
        ' {"id": "B", "atoms": [1], "p": 0.500000000002}]}')  # fmt: skip
#: 0.5 and 0.5000000002 over two atoms: a sum of 1 + 2e-10, a profit of 1e-10 (inf norm).
TINY = ('{"atoms": 2, "events": [{"id": "H0", "atoms": [0], "p": 0.5},'
        ' {"id": "H1", "atoms": [1], "p": 0.5000000002}]}')  # fmt: skip
#: 0.5 and 0.500000005 over two atoms: a profit of 2.5e-9, which its book earns.
SMALL = ('{"atoms": 2, "events": [{"id": "H0", "atoms": [0], "p": 0.5},'
         ' {"id": "H1", "atoms": [1], "p": 0.500000005}]}')  # fmt: skip


@pytest.mark.parametrize(
    ("events", "norm"), [(SAME_ATOM, "l1"), (SAME_ATOM, "inf"), (EDGE, "l1"), (TINY, "inf")]
)
def test_a_profit_below_the_certificates_resolution_shows_no_book(
    tmp_path: Path, events: str, norm: str
) -> None:
    """A profit above rounding (`ROUNDING_PROFIT`) but within the certificate's resolution
    (`CERTIFY_TOLERANCE`) was shown with a book that did not earn it: a table of its total
    row alone ("total | 0.0000 | +2.29e-11"), or rows adding to less than the total printed
    (the profit is the certificate's upper bound, the book its lower one). It is printed in
    scientific notation and said to be below the resolution, with no book; `--json` keeps
    its profit and stakes as they were."""
    path = tmp_path / "tiny.json"
    path.write_text(events)
    payload = _json(str(path), f"--norm={norm}")
    profit = payload["profit"]
    assert isinstance(profit, float) and ROUNDING_PROFIT < profit <= CERTIFY_TOLERANCE
    code, out, err = _run(str(path), f"--norm={norm}")
    assert code == 0, err
    assert f"Dutch-book profit: {profit:.2e}\n" in out
    assert f"below the certificate's resolution ({CERTIFY_TOLERANCE:g})" in out
    assert "Dutch book (" not in out and "│ total" not in out and "worst atom" not in out
    assert "coherent:" not in out and "0.00000" not in out


def test_a_profit_above_the_resolution_keeps_its_book(tmp_path: Path) -> None:
    """A profit too small for five decimals but above the certificate's resolution is shown
    in scientific notation with its book (1 + 5e-9 over two atoms: a profit of 2.5e-9)."""
    path = tmp_path / "small.json"
    path.write_text(SMALL)
    profit = _json(str(path))["profit"]
    assert isinstance(profit, float) and CERTIFY_TOLERANCE < profit < 1e-8
    code, out, err = _run(str(path))
    assert code == 0, err
    assert f"Dutch-book profit: {profit:.2e}" in out and f"+{profit:.2e}" in out
    assert "Dutch book (" in out and "resolution" not in out and "coherent:" not in out


#: Four events over two atoms, a profit of 4.32e-09 in the l1 norm whose certified book earns
#: 4.25e-09 (found in a search of small random sets just above the resolution).
SHORT_BOOK = ('{"atoms": 2, "events": [{"id": "A", "atoms": [0, 1], "p": 0.9999999979363838},'
              ' {"id": "B", "atoms": [0, 1], "p": 0.9999999999611712},'
              ' {"id": "C", "atoms": [1], "p": 0.9664340576485917},'
              ' {"id": "D", "atoms": [0], "p": 0.033565940128999834}]}')  # fmt: skip


def _total_row(out: str) -> str:
    return next(line for line in out.splitlines() if line.startswith("│ total")).split()[-2]


@pytest.mark.parametrize(("events", "norm"), [(SHORT_BOOK, "l1"), (SMALL, "inf")])
def test_the_books_total_is_what_it_earns(tmp_path: Path, events: str, norm: str) -> None:
    """The total row printed the profit, the LP's upper bound, under rows adding up to the
    book's worst payoff, its lower one: `SHORT_BOOK`'s rows total 4.25e-09 and were totalled
    +4.32e-09. The total is what the book earns in its worst atom, the rows' sum."""
    path = tmp_path / "book.json"
    path.write_text(events)
    payload = _json(str(path), f"--norm={norm}")
    data = check_module.read_input(path)
    stakes = np.array(list(payload["stakes"].values()))  # type: ignore[attr-defined]
    earned = float(atom_payoffs(data.panel.incidence, data.probs, stakes).min())
    code, out, err = _run(str(path), f"--norm={norm}")
    assert code == 0, err
    assert _total_row(out) == f"+{earned:.2e}", out
    apart = f"{earned:.2e}" != f"{payload['profit']:.2e}"
    assert (f"the book earns {earned:.2e}" in out) == apart


def test_a_book_earning_less_than_the_profit_says_the_profit_is_a_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A profit the certificate bounds 5e-10 above what its book earns (within its 1e-9)."""
    import scoring

    solved = scoring.dutch_books

    def bound_above(*args: object, **kwargs: object) -> scoring.DutchBookResult:
        result = solved(*args, **kwargs)  # type: ignore[arg-type]
        return dataclasses.replace(result, profit=result.profit + 5e-10)

    monkeypatch.setattr(scoring, "dutch_books", bound_above)
    path = tmp_path / "small.json"
    path.write_text(SMALL)
    code, out, err = _run(str(path))
    assert code == 0, err
    assert "Dutch-book profit: 3.00e-09\n" in out and _total_row(out) == "+2.50e-09"
    said = " ".join(out.split())  # as the console wrapped it
    assert (
        "the book earns 2.50e-09 in its worst atom; the profit above, 3.00e-09, is the LP's "
        f"upper bound (the two agree to the certificate's resolution, {CERTIFY_TOLERANCE:g})"
    ) in said


def test_a_set_scored_coherent_shows_and_reports_no_book(tmp_path: Path) -> None:
    """At a profit of exactly `ROUNDING_PROFIT`, scored 0, `--json` gave "stakes": {"A": -0.5,
    "B": -0.5} and coherent values other than the stated ones, and the text said "coherent"
    above a "Nearest coherent forecast" table of 0.5000 and 0.5000, noise. A set scored
    coherent holds no book (every stake 0.0) and is its own nearest coherent forecast."""
    path = tmp_path / "edge.json"
    path.write_text(EDGE)
    payload = _json(str(path))
    assert payload == {"norm": "inf", "profit": 0.0, "stakes": {"A": 0.0, "B": 0.0},
                       "coherent": {"A": 0.5, "B": 0.500000000002}}  # fmt: skip
    code, out, err = _run(str(path))
    assert code == 0, err
    assert "Dutch-book profit: 0.00000\ncoherent: " in out
    assert "Nearest coherent forecast" not in out and "Dutch book (" not in out
    code, out, err = _run(str(path), "--repair")  # the repair asked for is still shown
    assert code == 0, err
    assert "Nearest coherent forecast" not in out and "repaired" in out and "repair: " in out


@pytest.mark.parametrize(
    "events",
    ['{"id": "A", "atoms": [0], "p": -0.0}, {"id": "B", "atoms": [1], "p": 1.0}',
     '{"id": "A", "atoms": [0], "p": 0.5}'],  # an untraded contract's stake
)  # fmt: skip
def test_no_output_shows_a_negative_zero(tmp_path: Path, events: str) -> None:
    """`p = -0.0` was printed "-0.0000" as stated and repaired, and JSON held "repaired":
    {"A": -0.0}; `p = 0.5` on one of two atoms gave "stakes": {"A": -0.0}."""
    path = tmp_path / "zero.json"
    path.write_text(f'{{"atoms": 2, "events": [{events}]}}')
    for extra in ("--json", "--norm=l1"):
        code, out, err = _run(str(path), "--repair", extra)
        assert code == 0, err
        assert "-0.0" not in out and "0.0" in out, out


def test_a_dash_reads_standard_input() -> None:
    """`check -` said "-: no such file"; it reads standard input, JSON or TOML told as for a
    pipe (by its first character), through the console script's real stdin too."""
    for name in ("atoms.json", "figure1.toml"):
        text = (EXAMPLES / name).read_text(encoding="utf-8")
        result = CliRunner().invoke(_app(), ["check", "-", "--json"], input=text)
        assert result.exit_code == 0, result.stderr
        assert json.loads(result.stdout) == _json(str(EXAMPLES / name))
    done = subprocess.run(
        [sys.executable, "-m", "runs.cli", "check", "-"], capture_output=True, text=True,
        input=(EXAMPLES / "figure1.toml").read_text(encoding="utf-8"), timeout=120,
        check=False, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Dutch-book profit: 0.01113" in done.stdout
    code, _, err = _run("-", input_text="p = 2")
    assert code == 2 and err.startswith("error: -: ") and "no such file" not in err


def test_standard_input_from_the_null_device_is_refused_as_an_empty_file(tmp_path: Path) -> None:
    """`check - < /dev/null` said "error: -: is a character device, not a file", where the
    user had asked for standard input and it is empty: it says what an empty file says."""
    empty = tmp_path / "empty.toml"
    empty.write_bytes(b"")
    code, _, file_err = _run(str(empty))
    done = subprocess.run(
        [sys.executable, "-m", "runs.cli", "check", "-"], stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=120, check=False, cwd=ROOT,
    )  # fmt: skip
    assert code == done.returncode == 2
    assert done.stderr == file_err.replace(str(empty), "-") and done.stderr.count("\n") == 1


def test_a_file_named_dash_is_read_as_dot_slash_dash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "-").write_bytes((EXAMPLES / "atoms.json").read_bytes())
    assert _json("./-") == _json(str(EXAMPLES / "atoms.json"))
