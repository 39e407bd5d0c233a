"""Reading TOML that would exhaust the parser ends in one line, not a traceback or a kill.

tomllib recurses into nested arrays and inline tables (`RecursionError` some thousand levels
down) and its memory grows with the square of a dotted key's parts (a key of 100,000 parts,
200 KB of text, needed tens of GB). `panels.toml_text.loads` turns both into the
`TOMLDecodeError` every reader of a spec, family or check file already reports.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from panels import toml_text
from panels.families import FAMILIES_DIR, FamilyError, load_family
from runs.cli import app
from runs.spec import load_spec

DEEP_ARRAY = "x = " + "[" * 100_000 + "]" * 100_000
DEEP_INLINE = "x = " + "{a=" * 50_000 + "1" + "}" * 50_000
HUGE_KEY = ".".join(["k"] * 100_000) + " = 1"


@pytest.mark.parametrize("text", [DEEP_ARRAY, DEEP_INLINE], ids=["arrays", "inline tables"])
def test_nesting_too_deep_is_a_decode_error(text: str) -> None:
    with pytest.raises(tomllib.TOMLDecodeError, match="nested too deeply"):
        toml_text.loads(text)


def _key(parts: int) -> str:
    return ".".join(f"k{i}" for i in range(parts))


@pytest.mark.parametrize(
    "text",
    [
        HUGE_KEY,
        f"{_key(toml_text.MAX_KEY_PARTS + 1)} = 1",
        f"t = {{ {_key(toml_text.MAX_KEY_PARTS + 1)} = 1 }}",  # inside an inline table
        f"[{_key(toml_text.MAX_KEY_PARTS + 1)}]",  # a table header
        f"""{'."q.x" . '.join(["a"] * (toml_text.MAX_KEY_PARTS + 1))} = 1""",  # quoted parts
    ],
    ids=["100,000 parts", "one part too many", "in an inline table", "header", "quoted"],
)
def test_a_key_of_too_many_parts_is_refused_before_parsing(text: str) -> None:
    with pytest.raises(tomllib.TOMLDecodeError, match="more than 32 parts"):
        toml_text.loads(text)


@pytest.mark.parametrize(
    "text",
    [
        f"{_key(toml_text.MAX_KEY_PARTS)} = 1",
        "p = [" + ", ".join(["0.125"] * 5_000) + "]",
        'text = "' + "Sentence one. Sentence two. " * 2_000 + '"',
        'v = "1.2.3.4 5.6.7.8 e.g. i.e. ... www.example.com"',
    ],
    ids=["the most parts allowed", "decimals", "prose", "dots in a value"],
)
def test_what_real_inputs_hold_reads_as_tomllib_reads_it(text: str) -> None:
    assert toml_text.loads(text) == tomllib.loads(text)


def test_a_value_shaped_like_a_key_of_too_many_parts_is_refused_too() -> None:
    """The price of a check made before parsing: a string of 33 dotted words with nothing
    else between them reads as such a key. No spec, family or check file holds one."""
    with pytest.raises(tomllib.TOMLDecodeError, match="more than 32 parts"):
        toml_text.loads('v = "' + ".".join(["1"] * 33) + '"')


@pytest.mark.parametrize("command", ["plan", "check"])
def test_the_commands_end_in_one_line(tmp_path: Path, command: str) -> None:
    for text in (DEEP_ARRAY, HUGE_KEY):
        path = tmp_path / "bad.toml"
        path.write_text(text)
        result = CliRunner().invoke(app, [command, str(path)])
        assert result.exit_code == 2, result.output
        assert result.output.startswith(f"error: {path}: not valid TOML ("), result.output
        assert len(result.output.strip().splitlines()) == 1, result.output


def test_a_family_file_is_refused_by_name(tmp_path: Path) -> None:
    path = tmp_path / "family.toml"
    path.write_text('title = "t"\n' + HUGE_KEY)
    with pytest.raises(FamilyError, match="not valid TOML"):
        load_family(path)


# -- a byte order mark: Windows editors write one at the start of a UTF-8 file ---------------
BOM = "\ufeff".encode()
SMALL_SPEC = """name = "bom"
seed = 3
[data]
stock_days = 2
[[models]]
name = "m"
provider = "sim"
model = "sim-coherent"
[[arms]]
name = "baseline"
[[arms]]
name = "families/isolated"
"""


def test_decode_drops_one_leading_byte_order_mark_and_nothing_else() -> None:
    assert toml_text.decode(BOM + b"a = 1\n") == "a = 1\n"
    assert toml_text.decode(b'a = "\xef\xbb\xbf"\n') == 'a = "\ufeff"\n'  # inside a value: kept
    assert toml_text.decode(BOM + BOM + b"a = 1\n") == "\ufeffa = 1\n"  # one mark, not two
    with pytest.raises(UnicodeDecodeError):
        toml_text.decode(BOM + b"\xff")


def test_a_family_file_with_a_byte_order_mark_loads_as_without(tmp_path: Path) -> None:
    shipped = sorted(FAMILIES_DIR.glob("*.toml"))[0]
    path = tmp_path / shipped.name
    path.write_bytes(BOM + shipped.read_bytes())
    assert load_family(path) == load_family(shipped)


def test_a_check_file_with_a_byte_order_mark_scores_as_without(tmp_path: Path) -> None:
    figure1 = Path(__file__).resolve().parents[2] / "examples" / "figure1.toml"
    path = tmp_path / "figure1.toml"
    path.write_bytes(BOM + figure1.read_bytes())
    plain, marked = (CliRunner().invoke(app, ["check", str(p), "--json"]) for p in (figure1, path))
    assert marked.exit_code == 0, marked.output
    assert marked.stdout == plain.stdout


def test_a_spec_with_a_byte_order_mark_plans_and_keeps_no_mark(tmp_path: Path) -> None:
    """The spec's text is frozen in its run folder and read again there by `tomllib` alone
    (a resume's comparison, the audit, the report): it must not keep the mark."""
    plain, marked = tmp_path / "plain.toml", tmp_path / "marked.toml"
    plain.write_text(SMALL_SPEC, encoding="utf-8")
    marked.write_bytes(BOM + SMALL_SPEC.encode())
    assert load_spec(marked).text == SMALL_SPEC
    assert load_spec(marked).digest == load_spec(plain).digest
    planned = CliRunner().invoke(app, ["plan", str(marked), "--json"])
    assert planned.exit_code == 0, planned.output
    assert planned.stdout == CliRunner().invoke(app, ["plan", str(plain), "--json"]).stdout


# -- integers too long to print: tomllib keeps any integer ----------------------------------
LONG_INTEGER = "9" * 5_000  # more digits than int() converts (4,300): a ValueError in tomllib


def test_an_integer_of_more_digits_than_python_converts_is_a_decode_error() -> None:
    with pytest.raises(tomllib.TOMLDecodeError) as caught:
        toml_text.loads(f'a = 1\nb = "x"\n\np = {LONG_INTEGER}\n')
    message = str(caught.value)
    assert message == "line 4: an integer of more than 4,300 digits, longer than any input needs"
    assert "sys." not in message  # no advice about Python's internals


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("p = 0x" + "f" * 5_000, "p"),  # hexadecimal has no digit limit in int()
        ("[[models]]\nname = 'm'\n[[models]]\nrpm = 0b1" + "0" * 14_000, "models[1].rpm"),
        ('a.b."c d" = [1, [2, 0o1' + "0" * 5_000 + "]]", 'a.b."c d"[1][1]'),
        ("t = {x = [{y = 0x1" + "0" * 4_000 + "}]}", "t.x[0].y"),
    ],
    ids=["hexadecimal", "in an array of tables", "quoted key", "inline"],
)
def test_an_integer_too_long_to_print_is_refused_by_its_key(text: str, where: str) -> None:
    """A hexadecimal (octal, binary) integer converts at any length, then failed wherever a
    message printed it: refused, named by its key path."""
    with pytest.raises(tomllib.TOMLDecodeError) as caught:
        toml_text.loads(text)
    assert str(caught.value) == f"{where}: an integer of more than 4,000 digits, longer than " + (
        "any input needs"
    )


def test_integers_beyond_64_bits_read_as_tomllib_reads_them() -> None:
    """A seed of 64 bits or more is ordinary (`secrets.randbits(64)`, numpy's 128-bit
    entropy), and folders written before hold them: the 64-bit refusal a session added
    locked such a finished run out of `score`, `repair` and `report`. Each key keeps its own
    bound (`finite` for a float)."""
    text = (
        f"lo = {-(2**63) - 1}\nhi = {2**128}\nx = [[0x7fffffffffffffffff]]\nf = 1e400\n"
        f"big = 1{'0' * 400}\nedge = 0x{'f' * 3_499}\n"
    )
    assert toml_text.loads(text) == tomllib.loads(text)
    assert toml_text.finite(10**400) is None and toml_text.finite(2**64) == float(2**64)


def test_a_seed_beyond_64_bits_plans_as_before(tmp_path: Path) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text(SMALL_SPEC.replace("seed = 3", f"seed = {2**64 + 12_345}"), encoding="utf-8")
    result = CliRunner().invoke(app, ["plan", str(spec)])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize(
    ("line", "plan_says", "check_says"),
    [
        (f"seed = {LONG_INTEGER}", "not valid TOML (line ", "not valid TOML (line "),
        ("coverage_floor = 1" + "0" * 400, "coverage_floor", "outside [0, 1]"),
    ],
    ids=["too long to read", "too big for a float"],
)
def test_plan_and_check_refuse_a_huge_integer_in_one_line(
    tmp_path: Path, line: str, plan_says: str, check_says: str
) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text(SMALL_SPEC.replace("seed = 3", line), encoding="utf-8")
    check = tmp_path / "check.toml"
    number = line.split(" = ")[1]
    check.write_text(f'variables = ["a"]\n[[events]]\nid = "x"\nformula = "a"\np = {number}\n')
    for command, path, says in (("plan", spec, plan_says), ("check", check, check_says)):
        result = CliRunner().invoke(app, [command, str(path)])
        assert result.exit_code == 2, result.output
        assert result.output.startswith(f"error: {path}"), result.output
        assert says in result.output, result.output
        assert len(result.output.strip().splitlines()) == 1, result.output
        assert "Traceback" not in result.output and "sys." not in result.output


def test_a_family_file_with_a_huge_integer_is_refused_by_name(tmp_path: Path) -> None:
    path = tmp_path / "family.toml"
    path.write_text(f'title = "t"\nx = {LONG_INTEGER}\n')
    with pytest.raises(FamilyError, match="not valid TOML"):
        load_family(path)


def test_finite_takes_what_a_float_holds_and_nothing_else() -> None:
    assert toml_text.finite(3) == 3.0 and toml_text.finite(0.25) == 0.25
    assert toml_text.finite(10**400) is None  # float() raises OverflowError
    assert toml_text.finite(float("inf")) is None and toml_text.finite(float("nan")) is None
