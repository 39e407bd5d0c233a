"""`dutchbook check` within its bounds: huge numbers, long formulas, large JSON files.

A hostile tester found, each within every documented limit: an integer too long or too big
for a float ended in a traceback; formulas of 10,000 characters over 2^20 worlds ran for
minutes; a JSON file took 15 times its size in memory before any bound applied; and an
empty argument was refused as the directory ".".
"""

from __future__ import annotations

import json
import subprocess
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from panels import formula
from panels.formula import parse, truth_table
from runs.commands import check as check_module
from runs.commands.check import CheckInputError, read_input

ROOT = Path(__file__).resolve().parents[2]
NAMES = [f"v{i}" for i in range(20)]


def _run(*args: str) -> tuple[int, str, str]:
    app = typer.Typer(pretty_exceptions_enable=False)
    check_module.register(app)

    @app.callback()
    def _root() -> None:
        """dutchbook (test harness)."""

    result = CliRunner().invoke(app, ["check", *args])
    return result.exit_code, result.stdout, result.stderr


def _one_line_refusal(args: tuple[str, ...], expected: str) -> None:
    code, out, err = _run(*args)
    assert code == 2, err
    assert out == "" and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    assert expected in err, err


# -- numbers ---------------------------------------------------------------------------------
def test_a_probability_too_big_for_a_float_is_refused_in_one_line() -> None:
    """An integer too big for a float, from a TOML file or anywhere else, is refused here
    (`float()` raised OverflowError)."""
    with pytest.raises(CheckInputError, match=r"^f: event 'x': p = an integer that large is"):
        check_module._probability("f", "x", 10**400)
    with pytest.raises(CheckInputError, match=r"p = inf is outside \[0, 1\]"):
        check_module._probability("f", "x", float("inf"))
    assert check_module._probability("f", "x", 1) == 1.0


@pytest.mark.parametrize(
    ("number", "refusal"),
    [
        ("9" * 5_000, "not valid TOML (line 5: an integer of more than 4,300 digits"),
        ("0x" + "f" * 5_000, "not valid TOML (events[0].p: an integer of more than 4,000"),
        ("1" + "0" * 400, "event 'x': p = an integer that large is outside [0, 1]"),
    ],
    ids=["too many digits", "too long to print", "too big for a float"],
)
def test_a_toml_probability_of_a_huge_integer_is_refused_by_its_key(
    tmp_path: Path, number: str, refusal: str
) -> None:
    """Too long to read or print, refused as TOML; read whole, refused by the key's rule."""
    path = tmp_path / "big.toml"
    path.write_text(f'variables = ["a"]\n[[events]]\nid = "x"\nformula = "a"\np = {number}\n')
    _one_line_refusal((str(path),), f"{path}: {refusal}")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"atoms": 2, "events": [{"id": "x", "atoms": [0], "p": ' + "9" * 5_000 + "}]}",
         "not valid JSON (an integer of more than 4,300 digits)"),
        ('{"atoms": 2, "events": [{"id": "x", "atoms": [0], "p": NaN}]}',
         "not valid JSON (NaN is not a JSON number)"),
        ('{"atoms": 2, "events": [{"id": "x\\ud800", "atoms": [0], "p": 0.5}]}',
         "not valid JSON (a string holding U+D800, half a surrogate pair, not a character)"),
        ('\ufeff{"atoms": 2, "events": [{"id": "x", "atoms": [0], "p": 0.5}]}',
         "not valid JSON (a byte order mark (U+FEFF) at the start"),
        ('{"atoms": 2, "events": [{"id": "x", "atoms": [0], "p": 1e400}]}',
         "p = inf is outside [0, 1]"),
        ('{"atoms": 2, "events": [{"id": "x", "atoms": [0, true], "p": 0.5}]}',
         "atom index True is not in 0..1"),
    ],
    ids=["5,000 digits", "NaN", "half a surrogate pair", "byte order mark", "1e400", "true"],
)  # fmt: skip
def test_json_refuses_what_it_always_refused_in_one_line(
    tmp_path: Path, text: str, expected: str
) -> None:
    path = tmp_path / "input.json"
    path.write_text(text, encoding="utf-8")
    _one_line_refusal((str(path),), expected)


def test_an_empty_argument_is_said_to_be_empty() -> None:
    _one_line_refusal(("",), "error: the FILE argument is empty")


# -- long formulas over 2^20 worlds --------------------------------------------------------------
def _long_exactly_one() -> str:
    """`exactly_one(v0, v1, ..., v19, v0, ...)`: 2,840 variables in 9,952 characters."""
    args: list[str] = []
    while len("exactly_one(" + ",".join([*args, NAMES[len(args) % 20]]) + ")") <= 9_952:
        args.append(NAMES[len(args) % 20])
    return "exactly_one(" + ",".join(args) + ")"


def _file(tmp_path: Path, formulas: list[str]) -> Path:
    path = tmp_path / "long.toml"
    path.write_text(
        f"variables = {json.dumps(NAMES)}\n"
        + "".join(
            f'[[events]]\nid = "e{n}"\nformula = "{f}"\np = 0.5\n' for n, f in enumerate(formulas)
        )
    )
    return path


def test_formulas_too_long_for_their_worlds_are_refused_before_evaluation(tmp_path: Path) -> None:
    """255 such events ran four minutes; the 12th now passes 2^35 term evaluations and is
    refused there, before any truth value is computed or the rest is parsed."""
    text = _long_exactly_one()
    assert formula.term_count(parse(text, NAMES).root) == 2_841
    path = _file(tmp_path, [text] * 255)
    _one_line_refusal(
        (str(path),),
        f"{path}: event 'e11': formulas of 34,092 terms (variables and operators) so far, over "
        "1,048,576 possible worlds, are 35,748,052,992 term evaluations; check does at most "
        "34,359,738,368 (use shorter formulas, fewer events or fewer variables)",
    )


def test_the_term_bound_counts_constraints_and_events(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "small.toml"
    path.write_text(
        'variables = ["a", "b"]\nconstraints = ["a or b"]\n'
        '[[events]]\nid = "x"\nformula = "a and not b"\np = 0.5\n'
    )
    monkeypatch.setattr(check_module, "MAX_TERM_WORLDS", (3 + 4) * 4)  # 7 terms, 4 worlds
    assert read_input(path).panel.n_atoms == 2
    monkeypatch.setattr(check_module, "MAX_TERM_WORLDS", (3 + 4) * 4 - 1)
    with pytest.raises(CheckInputError, match="event 'x': formulas of 7 terms"):
        read_input(path)


def test_exactly_one_over_many_arguments_holds_no_array_per_argument() -> None:
    """Each argument of `exactly_one` was a fresh int32 array over every world (four bytes a
    world) and their sum another: 0.9 s for one 10,000-character formula over 2^20 worlds,
    8 bytes a world at the peak. Counted in bits, the evaluation holds the result (a byte a
    world) and each variable's bits (20 of them: 2.5 bytes a world), 3.75 at the peak."""
    worlds = 2**16
    codes = np.arange(worlds, dtype=np.uint32)
    columns = {v: ((codes >> (i % 16)) & 1).astype(bool) for i, v in enumerate(NAMES)}
    node = parse(_long_exactly_one(), NAMES).root
    tracemalloc.start()
    try:
        table = truth_table(node, columns)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    counts = sum(columns[name].astype(int) for name in _long_exactly_one()[12:-1].split(","))
    assert np.array_equal(table, counts == 1)
    assert peak < 5 * worlds, peak / worlds


# -- a large JSON file -------------------------------------------------------------------------
def test_a_json_file_is_read_once_and_a_key_twice_still_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """orjson's reader built a document of 16 bytes a value, and `json` then read the text
    again to see duplicate keys: now `json` reads it once, seeing them as it goes."""
    import orjson

    reads: list[int] = []
    real_loads = json.loads

    def counted(*args: Any, **kwargs: Any) -> Any:
        reads.append(1)
        return real_loads(*args, **kwargs)

    def no_orjson(*_: Any, **__: Any) -> Any:
        raise AssertionError("orjson read the check file")

    monkeypatch.setattr(json, "loads", counted)
    monkeypatch.setattr(orjson, "loads", no_orjson)
    assert read_input(ROOT / "examples" / "atoms.json").panel.n_atoms > 0
    assert reads == [1]
    twice = tmp_path / "twice.json"
    twice.write_text('{"atoms": 2, "events": [{"id": "x", "atoms": [0], "p": 0.3, "p": 0.9}]}')
    with pytest.raises(
        CheckInputError, match=r"not valid JSON \(the key 'p' twice in one object\)"
    ):
        read_input(twice)


def test_a_bad_index_is_named_in_any_chunk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(check_module, "_INDEX_CHUNK", 4)
    path = tmp_path / "atoms.json"
    bad = {5: [0, 1, 2, 0, 1, 2, 5], -1: [0, 1, 2, 0, 1, -1], 2.0: [0, 1, 2, 0, 2.0],
           2**63: [0, 1, 2, 0, 2**63]}  # fmt: skip
    for index, members in bad.items():
        expected = f"atom index {index} is not in 0..2"
        path.write_text(
            json.dumps({"atoms": 3, "events": [{"id": "x", "atoms": members, "p": 0.5}]})
        )
        with pytest.raises(CheckInputError, match=expected.replace(".", r"\.")):
            read_input(path)
    path.write_text(
        json.dumps({"atoms": 3, "events": [{"id": "x", "atoms": [2, 2, 0, 0, 0, 2], "p": 0.5}]})
    )
    panel = read_input(path).panel
    assert panel.n_atoms == 2 and panel.incidence.tolist() == [[1, 0]]


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads VmHWM from /proc")
def test_a_large_json_file_takes_less_than_ten_times_its_size(tmp_path: Path) -> None:
    """A 16 MiB file of atom indices (`[0,0,0,...]`) peaked 224 MB above the start when
    orjson and then `json` read it, 103 MB read once by `json` and marked in chunks."""
    path = tmp_path / "big.json"
    size = 16 * 2**20
    path.write_text(
        '{"atoms":3,"events":[{"id":"x","p":0.5,"atoms":[' + "0," * (size // 2) + "0]}]}"
    )
    child = (
        "import sys\nfrom pathlib import Path\nfrom runs.commands.check import read_input\n"
        "def hwm():\n"
        "    lines = open('/proc/self/status').read().splitlines()\n"
        "    return next(int(l.split()[1]) for l in lines if l.startswith('VmHWM:'))\n"
        "before = hwm()\nread_input(Path(sys.argv[1]))\nprint((hwm() - before) * 1024)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", child, str(path)], capture_output=True, text=True, cwd=ROOT,
        timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) < 10 * size, int(done.stdout) / size
