"""Specs are rejected before anything is sent, with the file, the key and what was expected."""

from __future__ import annotations

import datetime as dt
import tomllib
from pathlib import Path

import pytest

from runs.spec import SpecError, check_keys_read, check_one_form, load_spec, parse_spec

ARMS = {"baseline", "full-panel", "families/isolated"}
GOOD = """
name = "demo"
seed = 3
parser = "lenient"

[data]
stock_days = 4

[[models]]
name = "a"
provider = "sim"
model = "sim-coherent"
rpm = 600
price_in = 0.15
price_out = 0.6

[[models]]
name = "b"
provider = "groq"
model = "openai/gpt-oss-120b"
temperature = 1.0
max_tokens = 8192

[[arms]]
name = "baseline"
passes = 5
models = ["a"]

[[arms]]
name = "baseline"
passes = 1
models = ["b"]

[[arms]]
name = "full-panel"
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "spec.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_anchor_dates_read_as_dates_quoted_or_not(tmp_path: Path) -> None:
    text = GOOD.replace(
        "stock_days = 4", 'stock_days = 4\nanchor_from = 2025-08-15\nanchor_to = "2025-12-23"'
    )
    data = load_spec(write(tmp_path, text), arm_names=ARMS).data
    assert (data.anchor_from, data.anchor_to) == (dt.date(2025, 8, 15), dt.date(2025, 12, 23))
    assert load_spec(write(tmp_path, GOOD), arm_names=ARMS).data.anchor_from is None


def test_a_good_spec_loads(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, GOOD), arm_names=ARMS)
    assert spec.name == "demo" and spec.parser == "lenient" and spec.data.stock_days == 4
    a = spec.model("a")
    assert a.rpm == 600.0 and a.price_in_per_mtok == 0.15 and a.price_out_per_mtok == 0.6
    assert [(e.name, e.passes, e.models) for e in spec.arms] == [
        ("baseline", 5, ("a",)),
        ("baseline", 1, ("b",)),
        ("full-panel", 1, None),
    ]
    assert [m.name for m in spec.models_for(spec.arms[2])] == ["a", "b"]
    assert spec.sim_faults == "none"
    text = GOOD.replace('parser = "lenient"', 'parser = "lenient"\nsim_faults = "light"')
    faulty = load_spec(write(tmp_path, text), arm_names=ARMS)
    assert faulty.sim_faults == "light"


@pytest.mark.parametrize(
    ("edit", "key", "words"),
    [
        (("rpm = 600", "rpm = 600\nrpn = 3"), "models[0].rpn", "unknown"),
        (
            ('name = "full-panel"', 'name = "full-panels"'),
            "arms[2].name",
            "did you mean full-panel",
        ),
        # nothing near: the catalogue itself (the hint named a `dutchbook arms` command that
        # does not exist)
        (('name = "full-panel"', 'name = "qqqq"'), "arms[2].name", "one of baseline, "),
        (("temperature = 1.0", "temperature = 7.0"), "models[1].temperature", "[0, 2]"),
        (('provider = "groq"', 'provider = "grok"'), "models[1].provider", "one of"),
        (("rpm = 600", "rpm = -1"), "models[0].rpm", "> 1"),
        # a limit of one a minute or less: `run` ended in a traceback from the token bucket
        (("rpm = 600", "rpm = 0.4"), "models[0].rpm", "requests per minute > 1"),
        (("rpm = 600", "rpm = 1"), "models[0].rpm", "> 1"),
        (("rpm = 600", "rpm = 600\ntpm = 1"), "models[0].tpm", "tokens per minute > 1"),
        # each call is charged its max_tokens against tpm: 1e9 (a typo) slept a lane for months
        (("max_tokens = 8192", "max_tokens = 8192\ntpm = 8192"), "models[1].max_tokens",
         "less than the model's tpm (8192): one reply could use more tokens than a minute"),
        # one worker per slot: a billion used to fill the machine's memory before a request
        (("rpm = 600", "rpm = 600\nconcurrency = 1000000000"), "models[0].concurrency",
         "an integer from 1 to 10,000"),
        (("rpm = 600", "rpm = 600\nconcurrency = 0"), "models[0].concurrency", "from 1"),
        (("passes = 5", "passes = 0"), "arms[0].passes", ">= 1"),
        (('models = ["a"]', 'models = ["zz"]'), "arms[0].models", "'zz'"),
        (('models = ["b"]', 'models = ["a"]'), "arms[1].models", "already has"),
        (("stock_days = 4", "stock_days = 5"), "data.stock_days", "even"),
        # the paper's anchor dates (Aug 15 - Dec 23, 2025): a day, not a moment, in order
        (("stock_days = 4", "stock_days = 4\nanchor_from = 2025-12-24\nanchor_to = 2025-12-23"),
         "data.anchor_to", "on or after data.anchor_from (2025-12-24), not 2025-12-23"),
        (("stock_days = 4", "stock_days = 4\nanchor_from = 2025-08-15T16:00:00"),
         "data.anchor_from", "no time of day, not 2025-08-15T16:00:00"),
        (("stock_days = 4", 'stock_days = 4\nanchor_to = "20251223"'),
         "data.anchor_to", "YYYY-MM-DD (2025-08-15, quoted or not), no time of day, not '2025"),
        (("stock_days = 4", 'stock_days = 4\nanchor_to = "2025-02-30"'),
         "data.anchor_to", "not '2025-02-30'"),
        (("stock_days = 4", "stock_days = 4\nanchor_to = 20251223"), "data.anchor_to",
         "not 20251223"),
        (('parser = "lenient"', 'parser = "loose"'), "parser", "strict or lenient"),
        (("max_tokens = 8192", 'max_tokens = "8k"'), "models[1].max_tokens", "integer"),
        # multiplied by the queries for the estimate: 45 digits ended `run` in a TypeError
        (("max_tokens = 8192", "max_tokens = " + "1" * 45), "models[1].max_tokens",
         "an integer from 1 to 2,147,483,647"),
        (("max_tokens = 8192", "max_tokens = 2147483648"), "models[1].max_tokens", "to 2,147,"),
        (("[data]", '[data]\nreturns = "nowhere.csv"'), "data.returns", "does not"),
        # ENAMETOOLONG, which `Path.exists` raises: a traceback
        (("[data]", f'[data]\nfamilies = "{"f" * 300}"'), "data.families", "File name too long"),
        # taken by `plan`, refused by `run` (the adapter's check)
        (("max_tokens = 8192", 'max_tokens = 8192\ntoken_field = "bogus"'),
         "models[1].token_field", "one of max_completion_tokens, max_tokens, not 'bogus'"),
        # a file or a device: "error: /dev/null: not a directory", without the spec or the key
        (("[data]", '[data]\nfamilies = "/dev/null"'), "data.families", "a folder of family"),
        # the spec's own folder, read as families (its spec.toml "a family file")
        (("[data]", '[data]\nfamilies = ""'), "data.families", "not empty, no NUL"),
        # "embedded null byte", naming neither the file nor the key
        (("[data]", '[data]\nreturns = "a\\u0000b"'), "data.returns", "not empty, no NUL"),
        (("price_in = 0.15", "price_in = true"), "models[0].price_in", "USD"),
        (("price_in = 0.15", "price_in = 0.15\nbatch_price_in = -0.1\nbatch_price_out = 1"),
         "models[0].batch_price_in", "USD per million input tokens through the batch API"),
        (("price_in = 0.15", "price_in = 0.15\nbatch_price_in = 1\nbatch_price_out = nan"),
         "models[0].batch_price_out", "0 to 1,000,000"),
        (("price_in = 0.15", 'price_in = 0.15\nbatch_price_in = 1\nbatch_price_out = "0.3"'),
         "models[0].batch_price_out", "0 to 1,000,000"),
        (("price_in = 0.15", 'price_in = 0.15\nprice_date = "2026-02-30"'),
         "models[0].price_date", "YYYY-MM-DD, not '2026-02-30'"),
        (("price_in = 0.15", 'price_in = 0.15\nprice_date = "20261201"'),
         "models[0].price_date", "YYYY-MM-DD"),
        (("price_in = 0.15", "price_in = 0.15\nprice_date = 2026-12-01"),
         "models[0].price_date", "YYYY-MM-DD"),
        (("price_in = 0.15", 'price_in = 0.15\nprice_source = "  "'),
         "models[0].price_source", "a URL or a citation"),
        (("price_in = 0.15", 'price_in = 0.15\nprice_source = "https://pricing page"'),
         "models[0].price_source", "a URL with a host, not 'https://pricing'"),
        (("price_in = 0.15", "price_in = 0.15\nbatch_price_in = 0.075"),
         "models[0].batch_price_out", "required with batch_price_in"),
        (("price_in = 0.15", 'price_in = 0.15\nprice_source = "a\\nb"'),
         "models[0].price_source", "one line"),
        (("max_tokens = 8192", 'max_tokens = 8192\nresponse_format = "xml"'),
         "models[1].response_format", "json_schema, json_object_schema, grammar"),
        (("max_tokens = 8192", 'max_tokens = 8192\njson_mode = true\nresponse_format = "grammar"'),
         "models[1].json_mode", "not both"),
        (("max_tokens = 8192", 'max_tokens = 8192\ntokenizer = "gpt2"'),
         "models[1].tokenizer", "gemma3"),
        (("max_tokens = 8192", 'max_tokens = 8192\nfold_system = "yes"'),
         "models[1].fold_system", "true or false"),
        (("max_tokens = 8192", 'max_tokens = 8192\nbase_url_env = "http://x"'),
         "models[1].base_url_env", "NAME"),
        # taken and ignored: the requests went to Groq's own root with the real key
        (("max_tokens = 8192", 'max_tokens = 8192\nbase_url_env = "MY_GROQ_URL"'),
         "models[1].base_url_env", 'provider "openai" only'),
        # written raw into report.md and the audit's tables
        (('name = "b"', 'name = "b"\nabout = "x\\u001b[31m"'), "models[1].about",
         "one line without control characters"),
        (('model = "openai/gpt-oss-120b"', 'model = "openai/gpt\\u0007"'), "models[1].model",
         "one line without control characters"),
        # taken and shown blank, or whole in every table, log line and figure panel
        (('name = "b"', 'name = " "'), "models[1].name", "without leading or trailing spaces"),
        (('name = "b"', 'name = "b "'), "models[1].name", "without leading or trailing spaces"),
        (('name = "b"', f'name = "{"b" * 101}"'), "models[1].name", "at most 100 characters"),
        # each was taken and every request then failed in the adapter ("ValueError")
        (("max_tokens = 8192", 'max_tokens = 8192\nbase_url = "http://[::1"'),
         "models[1].base_url", "a well-formed http:// or https:// URL (Invalid IPv6 URL)"),
        (("max_tokens = 8192", 'max_tokens = 8192\nbase_url = "http://h:99999/v1"'),
         "models[1].base_url", "(Port out of range 0-65535)"),
        (("max_tokens = 8192", 'max_tokens = 8192\nbase_url = "https://"'),
         "models[1].base_url", "an http:// or https:// URL naming a host"),
        (("max_tokens = 8192", 'max_tokens = 8192\nbase_url = "https://a b/v1"'),
         "models[1].base_url", "naming a host"),
        # a line break in the path was dropped by urlsplit: the requests went to ".../v1X: y"
        (("max_tokens = 8192", 'max_tokens = 8192\nbase_url = "http://h.example/v1\\nX: y"'),
         "models[1].base_url", "without spaces or control characters"),
        (("max_tokens = 8192", 'max_tokens = 8192\nbase_url = "http://h.example/my v1"'),
         "models[1].base_url", "without spaces or control characters"),
        (("max_tokens = 8192", 'max_tokens = 8192\nbase_url = "ftp://h/v1"'),
         "models[1].base_url", "an http:// or https:// URL"),
        # a password in the URL would reach every failure's detail, and so the ledger
        (("max_tokens = 8192", 'max_tokens = 8192\nbase_url = "http://me:pw@h/v1"'),
         "models[1].base_url", "a URL without a user or password"),
        # chat_url would append its path after the query
        (("max_tokens = 8192", 'max_tokens = 8192\nbase_url = "http://h/v1?key=1"'),
         "models[1].base_url", "without a ?query or #fragment"),
        (("max_tokens = 8192", 'max_tokens = 8192\nbase_url = "http://h/v1#x"'),
         "models[1].base_url", "without a ?query or #fragment"),
        (("seed = 3", "seed = 3\nmax_answer_failures = 9"), "max_answer_failures",
         "max_attempts=8"),
        # numpy's generator (the stock-day sample) refused it at planning, naming no key
        (("seed = 3", "seed = -3"), "seed", "an integer >= 0"),
        # a campaign's cost overflowed to infinity ("$inf")
        (("max_tokens = 8192", "max_tokens = 8192\nprice_out = 1e305"), "models[1].price_out",
         "0 to 1,000,000"),
        (("max_tokens = 8192", "max_tokens = 8192\nabout = 3"), "models[1].about",
         "a short description"),
        (("max_tokens = 8192", 'max_tokens = 8192\nabout = "' + "x" * 201 + '"'),
         "models[1].about", "at most 200 characters"),
        (('parser = "lenient"', 'parser = "lenient"\nsim_faults = "flakey"'), "sim_faults",
         "unknown fault profile 'flakey'; did you mean flaky? known: none"),
        (('parser = "lenient"', 'parser = "lenient"\nsim_faults = "light,rate_limt=0.1"'),
         "sim_faults", "unknown fault kind 'rate_limt'; did you mean rate_limit"),
        (('parser = "lenient"',
          'parser = "lenient"\nsim_faults = "rate_limit=0.6,server_error=0.6"'),
         "sim_faults", "sum to <= 1"),
        # NaN passed the sum check, and `plan` went on with a profile that drew wrongly
        (('parser = "lenient"', 'parser = "lenient"\nsim_faults = "hostile,server_error=nan"'),
         "sim_faults", "'server_error' must be >= 0 and <= 1, not nan"),
        # `plan` took both; `run` refused the first only after writing its folder, and the
        # second was dropped without a word (the id decides)
        (("rpm = 600", 'rpm = 600\npersonality = "nope"'),
         "models[0].personality",
         "one of coherent, noisy, anchored, framing, fraction, not 'nope'"),
        (("rpm = 600", 'rpm = 600\npersonality = "noisy"'), "models[0].personality",
         "the personality the model id 'sim-coherent' names (coherent), or no personality key, "
         "not 'noisy' (the id decides)"),
    ],
)
def test_bad_specs_name_the_key(
    tmp_path: Path, edit: tuple[str, str], key: str, words: str
) -> None:
    old, new = edit
    assert old in GOOD
    path = write(tmp_path, GOOD.replace(old, new, 1))
    with pytest.raises(SpecError) as info:
        load_spec(path, arm_names=ARMS)
    message = str(info.value)
    assert message.startswith(str(path)), message
    assert info.value.key == key, message
    assert words in message, message


def test_a_personality_the_model_id_agrees_with_or_does_not_name_loads(tmp_path: Path) -> None:
    text = GOOD.replace("rpm = 600", 'rpm = 600\npersonality = "coherent"', 1).replace(
        "max_tokens = 8192", 'max_tokens = 8192\npersonality = "framing"', 1
    ).replace('provider = "groq"', 'provider = "sim"', 1)  # a groq model has no personality
    spec = load_spec(write(tmp_path, text), arm_names=ARMS)
    assert spec.model("a").extra["personality"] == "coherent"
    assert spec.model("b").extra["personality"] == "framing"


def test_batch_prices_and_their_provenance_load(tmp_path: Path) -> None:
    text = GOOD.replace(
        "price_out = 0.6",
        'price_out = 0.6\nbatch_price_in = 0.075\nbatch_price_out = 0.3\n'
        'price_date = "2026-11-30"\nprice_source = "https://groq.com/pricing"',
        1,
    )
    spec = load_spec(write(tmp_path, text), arm_names=ARMS)
    a, b = spec.model("a"), spec.model("b")
    assert (a.price_in_per_mtok, a.price_out_per_mtok) == (0.15, 0.6)
    assert (a.batch_price_in_per_mtok, a.batch_price_out_per_mtok) == (0.075, 0.3)
    assert (a.price_date, a.price_source) == ("2026-11-30", "https://groq.com/pricing")
    assert "price_date" not in a.extra and "batch_price_in" not in a.extra
    assert (b.batch_price_in_per_mtok, b.price_date, b.price_source) == (None, None, None)
    cited = text.replace("https://groq.com/pricing", "Groq price list, read 2026-11-30")
    assert load_spec(write(tmp_path, cited), arm_names=ARMS).model("a").price_source == (
        "Groq price list, read 2026-11-30"
    )


def test_local_model_keys_load(tmp_path: Path) -> None:
    extra = (
        'max_tokens = 8192\nresponse_format = "grammar"\nfold_system = true\n'
        'tokenizer = "gemma3"\nbase_url_env = "LOCAL_URL"\nbase_url = "http://127.0.0.1:9/v1"'
    )
    text = (
        GOOD.replace("max_tokens = 8192", extra, 1)
        .replace("seed = 3", "seed = 3\nmax_answer_failures = 2")
        .replace('provider = "groq"', 'provider = "openai"')
    )
    spec = load_spec(write(tmp_path, text), arm_names=ARMS)
    b = spec.model("b")
    assert (b.response_format, b.fold_system, b.tokenizer) == ("grammar", True, "gemma3")
    assert b.extra["base_url_env"] == "LOCAL_URL"
    assert spec.max_answer_failures == 2
    assert load_spec(write(tmp_path, GOOD), arm_names=ARMS).max_answer_failures == 3


def test_max_down_s_is_read_as_seconds_and_is_absent_unless_given(tmp_path: Path) -> None:
    text = GOOD.replace("rpm = 600", "rpm = 600\nmax_down_s = 900", 1)
    spec = load_spec(write(tmp_path, text), arm_names=ARMS)
    assert spec.model("a").max_down_s == 900.0 and spec.model("b").max_down_s is None


@pytest.mark.parametrize("fallback", ["", 'batch_fallback = "batch"\n'])
def test_max_down_s_on_a_batch_model_that_never_asks_live_is_refused(
    tmp_path: Path, fallback: str
) -> None:
    """Accepted without a word on a batch model, it limited nothing: a batch lane never
    pauses for a provider down. With `batch_fallback = "live"` its live lane uses it."""
    batch = f'max_tokens = 8192\ndispatch = "batch"\nmax_down_s = 60\n{fallback}'
    with pytest.raises(SpecError) as info:
        load_spec(write(tmp_path, GOOD.replace("max_tokens = 8192", batch, 1)), arm_names=ARMS)
    said = str(info.value)
    assert info.value.key == "models[1].max_down_s" and "\n" not in said
    assert "model 'b' is dispatched as batch, whose lane never pauses" in said
    assert 'remove it, or set batch_fallback = "live"' in said
    live = 'max_tokens = 8192\ndispatch = "batch"\nmax_down_s = 60\nbatch_fallback = "live"'
    spec = load_spec(write(tmp_path, GOOD.replace("max_tokens = 8192", live, 1)), arm_names=ARMS)
    assert spec.model("b").max_down_s == 60.0


@pytest.mark.parametrize("value", ["0", "-5", "true", '"600"', "inf", "nan"])
def test_a_max_down_s_that_is_no_positive_number_is_refused_in_one_line(
    tmp_path: Path, value: str
) -> None:
    text = GOOD.replace("rpm = 600", f"rpm = 600\nmax_down_s = {value}", 1)
    with pytest.raises(SpecError) as info:
        load_spec(write(tmp_path, text), arm_names=ARMS)
    said = str(info.value)
    assert info.value.key == "models[0].max_down_s" and "\n" not in said
    assert said.endswith("models[0].max_down_s: seconds > 0: how long a lane may be down "
                         "before it stops (omit it to probe until the provider comes back)")


def test_about_is_for_the_report_and_reaches_no_adapter(tmp_path: Path) -> None:
    text = GOOD.replace("max_tokens = 8192", 'max_tokens = 8192\nabout = "a 270M base model"', 1)
    b = load_spec(write(tmp_path, text), arm_names=ARMS).model("b")
    assert "about" not in b.extra
    assert "270M" not in repr(b)


def test_missing_file_and_bad_toml(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="no such file"):
        load_spec(tmp_path / "absent.toml", arm_names=ARMS)
    with pytest.raises(SpecError, match="not valid TOML"):
        load_spec(write(tmp_path, "name = "), arm_names=ARMS)


HUGE = 10**400  # an integer too big for a float: float() and math.isfinite() raise


@pytest.mark.parametrize(
    ("key", "words"),
    [
        ("coverage_floor", "a share in [0, 1]"),
        ("models[0].rpm", "requests per minute > 1"),
        ("models[0].timeout_s", "seconds > 0"),
        ("models[0].max_down_s", "seconds > 0"),
        ("models[0].price_in", "USD per million input tokens, 0 to 1,000,000"),
        ("models[0].concurrency", "an integer from 1 to"),
        ("models[1].temperature", "a number in [0, 2]"),
    ],
)
def test_a_number_too_big_for_a_float_is_refused_by_its_key(
    tmp_path: Path, key: str, words: str
) -> None:
    """Each key's own rule refuses such an integer, naming the key, where it was a traceback
    (`float()`'s OverflowError), from a spec file or a table given to `parse_spec`."""
    raw = tomllib.loads(GOOD)
    table, _, name = key.rpartition(".")
    target = raw["models"][int(table[7])] if table else raw
    target[name] = HUGE
    with pytest.raises(SpecError) as info:
        parse_spec(raw, Path("spec.toml"), arm_names=ARMS)
    assert info.value.key == key and words in str(info.value), str(info.value)
    text = GOOD.replace('parser = "lenient"', f"coverage_floor = {HUGE}")
    with pytest.raises(SpecError) as from_file:
        load_spec(write(tmp_path, text), arm_names=ARMS)
    assert from_file.value.key == "coverage_floor", str(from_file.value)


def test_a_key_in_the_spec_is_refused_by_name_not_read(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD.replace("rpm = 600", 'rpm = 600\napi_key = "sk-live-123"', 1))
    with pytest.raises(SpecError) as info:
        load_spec(path, arm_names=ARMS)
    assert info.value.key == "models[0].api_key"
    assert "sk-live-123" not in str(info.value)
    assert "a credential never goes in a spec" in str(info.value)
    assert "api_key_env" in info.value.expected


@pytest.mark.parametrize("key", ["token", "API_KEY", "secret", "aws_secret_access_key"])
def test_every_credential_spelling_is_refused_with_the_way_to_give_one(
    tmp_path: Path, key: str
) -> None:
    path = write(tmp_path, GOOD.replace("rpm = 600", f'rpm = 600\n{key} = "sk-live-123"', 1))
    with pytest.raises(SpecError, match="give that variable's name as api_key_env") as info:
        load_spec(path, arm_names=ARMS)
    assert "sk-live-123" not in str(info.value)


@pytest.mark.parametrize(
    ("line", "where"),
    [
        ('api_key_env = "gsk_TESTSECRET123"', "models[0].api_key_env"),
        ('base_url_env = "AKIAIOSFODNN7EXAMPLE"', "models[0].base_url_env"),
        ('about = "ours, key sk-abcdefgh12345"', "models[0].about"),
        # an AWS access key id of letters alone: the digit the other shapes need is not in it
        ('about = "AKIAABCDEFGHIJKLMNOP"', "models[0].about"),
        ('about = "temporary: ASIAQWERTYUIOPASDFGH"', "models[0].about"),
        # a suffix after it (a `-` read as inside a word let it pass; a digit-bearing key not)
        ('about = "AKIAABCDEFGHIJKLMNOP-x"', "models[0].about"),
        ('about = "AKIAABCDEFGHIJKLMNOP_old"', "models[0].about"),
        # a key as a query string's value: the query shape had swallowed it whole
        ('about = "via https://x.example/v1?key=AIzaSyD-1234567890abcdefghijklmnopqrs"',
         "models[0].about"),
        # keys with no prefix, where a variable's name goes (DeepInfra's, Azure's hex)
        ('api_key_env = "jD8xK2mP9qR4sT7vW1yZ3bN6cF0hL5aE"', "models[0].api_key_env"),
        ('api_key_env = "3f9a0c2b7d4e8f1a6b5c9d0e2f4a7b8c"', "models[0].api_key_env"),
    ],
)
def test_a_value_shaped_like_a_key_is_refused_wherever_it_stands_never_shown(
    tmp_path: Path, line: str, where: str
) -> None:
    """A key pasted where a variable's name goes passed the name check, was printed in the
    run's "set gsk_... first" line and frozen into the run folder with the spec."""
    path = write(tmp_path, GOOD.replace("rpm = 600", f"rpm = 600\n{line}", 1))
    with pytest.raises(SpecError) as info:
        load_spec(path, arm_names=ARMS)
    assert info.value.key == where
    assert "looks like a credential (not shown)" in str(info.value)
    secret = line.split('"')[1].split()[-1]
    assert secret not in str(info.value)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("rpm = 600", 'rpm = 600\nabout = "risk-aware, task-skewed: asks for a key= nothing"'),
        ("rpm = 600", 'rpm = 600\nabout = "the sk-instruct finetune, from our sk-experiments"'),
        ("rpm = 600", 'rpm = 600\nprice_source = "https://docs.example/edit?key=pricing2025"\n'
                      'price_date = "2026-01-02"'),
        ('"openai/gpt-oss-120b"', '"my-org/llama-3-8b-sk-2024-instruct-v1"'),
        ("max_tokens = 8192", 'max_tokens = 8192\nbase_url = '
                              '"https://proj-sk-prod-eastus2-001.openai.azure.com/v1"'),
        ("rpm = 600", 'rpm = 600\nabout = "Aizawa-lab-llama-3-8b-instruct-v2, asiaforecast2024"'),
        ("rpm = 600", 'rpm = 600\napi_key_env = "MY_ORG_DEEPINFRA_API_KEY_2024"'),
        # an AWS key id's letters, but not its length or not a word of its own
        ("rpm = 600", 'rpm = 600\nabout = "ASIAPACIFICFORECASTSX, ASIA-PACIFIC-LAB-ABCDEFGHIJ"'),
        ("rpm = 600", 'rpm = 600\nabout = "lab-AKIAABCDEFGHIJKLMNOP"'),
    ],
)
def test_words_that_only_look_like_a_key_are_not_taken_for_one(
    tmp_path: Path, old: str, new: str
) -> None:
    load_spec(write(tmp_path, GOOD.replace(old, new, 1)), arm_names=ARMS)


@pytest.mark.parametrize("name", ["two\\nlines", "tab\\there", "red\\u001b[31m", "x\\u2028y"])
def test_a_model_name_with_a_control_character_is_refused(tmp_path: Path, name: str) -> None:
    path = write(tmp_path, GOOD.replace('name = "a"', f'name = "{name}"', 1))
    with pytest.raises(SpecError, match="one line without control characters") as info:
        load_spec(path, arm_names=ARMS)
    assert info.value.key == "models[0].name"


@pytest.mark.parametrize(
    ("key", "old", "value", "shown"),
    [
        ("name", 'name = "a"', "a\\u200b", "U+200B ZERO WIDTH SPACE"),
        ("name", 'name = "a"', "a\\u200d", "U+200D ZERO WIDTH JOINER"),
        ("name", 'name = "a"', "\\u202ea", "U+202E RIGHT-TO-LEFT OVERRIDE"),
        ("name", 'name = "a"', "\\ufeffa", "U+FEFF ZERO WIDTH NO-BREAK SPACE"),
        ("name", 'name = "a"', "\U0001f469\\u200d\U0001f4bb", "U+200D"),  # no name needs one
        ("model", 'model = "sim-coherent"', "sim-coherent\\u00ad", "U+00AD SOFT HYPHEN"),
        ("about", 'rpm = 600', "a \\u2066model", "U+2066 LEFT-TO-RIGHT ISOLATE"),
        ("about", 'rpm = 600', "a model \\u200d", "U+200D"),  # joins nothing
    ],
)
def test_an_invisible_format_character_is_refused_by_key_and_code_point(
    tmp_path: Path, key: str, old: str, value: str, shown: str
) -> None:
    """Two models, "a" and "a" + U+200B, ran under one heading in every table."""
    new = f'{key} = "{value}"' if key != "about" else f'{old}\nabout = "{value}"'
    path = write(tmp_path, GOOD.replace(old, new, 1))
    with pytest.raises(SpecError) as info:
        load_spec(path, arm_names=ARMS)
    assert info.value.key == f"models[0].{key}"
    assert f"holding {shown}" in str(info.value) and "\n" not in str(info.value)


def test_a_model_about_may_join_emoji_and_letters(tmp_path: Path) -> None:
    about = "\U0001f469\u200d\U0001f4bb \u0645\u06cc\u200c\u062e 模型"
    path = write(tmp_path, GOOD.replace("rpm = 600", f'rpm = 600\nabout = "{about}"', 1))
    load_spec(path, arm_names=ARMS)


def test_a_model_name_may_be_any_printable_text(tmp_path: Path) -> None:
    name = "ünï cødé <b>x</b> $(id) ../x 模型 🤖"
    path = write(tmp_path, GOOD.replace('name = "a"', f'name = "{name}"', 1).replace(
        'models = ["a"]', f'models = ["{name}"]'))
    assert load_spec(path, arm_names=ARMS).models[0].name == name


def test_an_unknown_key_names_the_nearest_known_one(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD.replace("rpm = 600", "rpm = 600\nmax_token = 64", 1))
    with pytest.raises(SpecError) as info:
        load_spec(path, arm_names=ARMS)
    assert info.value.key == "models[0].max_token"
    # The nearest first; `max_down_s` is near enough to be named after it.
    assert info.value.expected.startswith("an unknown key; did you mean max_tokens, max_down_s?")


def test_a_model_name_of_the_longest_length_loads(tmp_path: Path) -> None:
    longest = "b" * 100
    text = GOOD.replace('name = "b"', f'name = "{longest}"', 1).replace('"b"', f'"{longest}"')
    assert load_spec(write(tmp_path, text), arm_names=ARMS).model(longest).name == longest


def test_one_model_name_in_two_unicode_forms_is_refused(tmp_path: Path) -> None:
    """"café" with U+00E9 and "cafe" + U+0301 ran as two models, drawn alike in every table,
    figure and page of the report. Loaded as written (a run folder's frozen spec an earlier
    build ran with them must stay readable), refused by `check_one_form` where a new design
    is planned."""
    text = (
        GOOD.replace('name = "a"', 'name = "caf\\u00e9"', 1)
        .replace('name = "b"', 'name = "cafe\\u0301"', 1)
        .replace('models = ["a"]', 'models = ["caf\\u00e9"]')
        .replace('models = ["b"]', 'models = ["cafe\\u0301"]')
    )
    spec = load_spec(write(tmp_path, text), arm_names=ARMS)
    assert [m.name for m in spec.models] == ["caf\u00e9", "cafe\u0301"]
    with pytest.raises(SpecError) as info:
        check_one_form(spec)
    assert info.value.key == "models"
    assert "'caf\\xe9' and 'cafe\\u0301'" in str(info.value) and "\n" not in str(info.value)


def test_an_arm_naming_a_model_in_another_unicode_form_shows_both(tmp_path: Path) -> None:
    """An arm's "café" written in another form than the model's was refused as "'café' is
    not [declared]", beside a [[models]] table declaring "café"."""
    text = GOOD.replace('name = "a"', 'name = "cafe\\u0301"', 1).replace(
        'models = ["a"]', 'models = ["caf\\u00e9"]'
    )
    with pytest.raises(SpecError) as info:
        load_spec(write(tmp_path, text), arm_names=ARMS)
    assert info.value.key == "arms[0].models"
    assert "('caf\\xe9' here, declared as 'cafe\\u0301': one name in two" in str(info.value)


def test_a_window_that_holds_no_stock_day_names_its_keys_and_the_datas_dates(
    tmp_path: Path,
) -> None:
    """The paper's window on the embedded data (2018-2022) blamed the returns file; one date
    too few for the stock-days asked blamed only `stock_days`."""
    from typer.testing import CliRunner

    from runs.cli import app

    base = GOOD.replace("stock_days = 4", "stock_days = 4\nanchor_from = {}\nanchor_to = {}")
    said = []
    for first, last in (("2025-08-15", "2025-12-23"), ("2021-03-01", "2021-03-01")):
        spec = write(tmp_path, base.format(first, last))
        result = CliRunner().invoke(app, ["plan", str(spec)])
        assert result.exit_code == 2, result.output
        said.append(result.output.strip())
    assert said[0] == (
        f"error: {tmp_path / 'spec.toml'}: data.anchor_from: a window of anchor dates holding "
        "stock-days of the returns, which run from 2018-01-02 to 2022-12-28: no stock-day has "
        "60 prior and 5 later trading days (anchor dates 2025-08-15 to 2025-12-23)"
    )
    assert said[1].startswith(
        f"error: {tmp_path / 'spec.toml'}: data.stock_days: an even number of at most 2 with "
        "this data and seed (or a wider data.anchor_from to data.anchor_to): asked for 4 "
        "stock-days (2 dates with two stocks each) but only 1 date qualifies"
    ), said[1]


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ('parser = "lenient"', 'parser = "sk-SECRETINSPEC1234567"'),
        ('provider = "sim"', 'provider = "gsk_SECRETINSPEC1234567"'),
        ("rpm = 600", 'rpm = 600\nresponse_format = "sk-SECRETINSPEC1234567"'),
        ('name = "baseline"\npasses = 5', 'name = "sk-SECRETINSPEC1234567"\npasses = 5'),
        ('models = ["a"]', 'models = ["sk-SECRETINSPEC1234567"]'),
    ],
)
def test_a_key_pasted_as_a_checked_value_is_refused_as_one_never_quoted(
    tmp_path: Path, old: str, new: str
) -> None:
    """A hostile pass: each of these keys' own refusals quoted the value in full ("strict or
    lenient, not 'sk-...'"); the search for a credential ran after them."""
    with pytest.raises(SpecError) as info:
        load_spec(write(tmp_path, GOOD.replace(old, new, 1)), arm_names=ARMS)
    assert "SECRETINSPEC" not in str(info.value)
    assert "looks like a credential (not shown)" in str(info.value)


def test_a_key_in_a_comment_is_refused_by_its_line_never_shown(tmp_path: Path) -> None:
    """A key commented out (an old one kept) was frozen into the run folder with the spec's
    text (`spec.toml`, `spec-history.jsonl`): the search read the table, with no comments."""
    text = GOOD.replace("rpm = 600", 'rpm = 600\n# api_key = "gsk_SECRETINSPEC12345678" (old)', 1)
    with pytest.raises(SpecError) as info:
        load_spec(write(tmp_path, text), arm_names=ARMS)
    line = 1 + text.splitlines().index('# api_key = "gsk_SECRETINSPEC12345678" (old)')
    assert info.value.key == f"line {line}", str(info.value)
    assert "a comment here holds what looks like a credential (not shown)" in str(info.value)
    assert "SECRETINSPEC" not in str(info.value)


@pytest.mark.parametrize(
    "comment",
    [
        "# the sk-instruct finetune, from our sk-experiments",
        "# keys: https://console.groq.com/keys, in GROQ_API_KEY",
        '# about = "Aizawa-lab-llama-3-8b-instruct-v2, asiaforecast2024"',
    ],
)
def test_a_comment_that_only_looks_like_a_key_and_a_hash_in_a_string_are_read(
    tmp_path: Path, comment: str
) -> None:
    text = GOOD.replace("rpm = 600", f"rpm = 600\n{comment}", 1).replace(
        'model = "sim-coherent"', 'model = "sim-coherent"\nabout = "#1 gsk_ in a string: #x"', 1
    )
    # A model id is not searched: a `#` in it begins no comment, whatever follows it.
    text = text.replace('"openai/gpt-oss-120b"', '"org/x#sk-abcdefgh12345678"', 1)
    load_spec(write(tmp_path, text), arm_names=ARMS)


def test_toml_comments_are_found_outside_strings_only() -> None:
    from panels.toml_text import comments

    text = (
        'a = "x#y" # one\nb = """multi\n# not one """\n# two\nc = \'lit#\'  # three\n'
        'd = "esc \\" # in" # four\ne = \'\'\'x\n#no\'\'\'\'\' # five\n"k#ey" = 1 # six\n'
    )
    tomllib.loads(text)  # a valid TOML text, as `comments` is given
    assert list(comments(text)) == [
        (1, " one"), (4, " two"), (5, " three"), (6, " four"), (8, " five"), (9, " six")
    ]


@pytest.mark.parametrize(
    ("old", "new", "where"),
    [
        ('name = "a"', 'name = "sk-SECRETINSPEC1234567"', "models[0].name"),
        ('name = "demo"', 'name = "sk-SECRETINSPEC1234567"', "name"),
    ],
)
def test_a_name_shaped_like_a_key_is_refused_for_a_new_design(
    tmp_path: Path, old: str, new: str, where: str
) -> None:
    """A model named like a key ran: every table and page showed it whole while the logs
    masked it as `***`. Loaded as written (a folder an earlier build ran with one stays
    readable), refused where a new design is planned."""
    text = GOOD.split("[[arms]]")[0] + '[[arms]]\nname = "baseline"\n'  # of all models
    text = text.replace(old, new, 1)
    spec = load_spec(write(tmp_path, text), arm_names=ARMS)
    with pytest.raises(SpecError, match="named like a credential") as info:
        check_one_form(spec)
    assert info.value.key == where and "SECRETINSPEC" not in str(info.value)
    assert "api_key_env" not in str(info.value)  # a name's refusal: no variable to set


def test_a_campaign_name_too_long_for_its_folder_is_refused_by_plan(tmp_path: Path) -> None:
    """`plan` took a 300-character name; `run` then failed to make `out/xxx...` (a file name
    is at most 255 bytes). Loaded as written: a folder run under `--out` with one stays
    readable."""
    for name in ("x" * 300, "\u4e88" * 90):  # 90 CJK letters: 270 bytes, in 100 characters
        spec = load_spec(write(tmp_path, GOOD.replace('"demo"', f'"{name}"')), arm_names=ARMS)
        with pytest.raises(SpecError, match="at most 200 bytes in UTF-8") as info:
            check_one_form(spec)
        assert info.value.key == "name"
    check_one_form(load_spec(write(tmp_path, GOOD.replace('"demo"', f'"{"x" * 200}"')),
                             arm_names=ARMS))


@pytest.mark.parametrize(
    "line", ["gsk_abcdefgh12345678XYZ = 1", '"sk-proj-abcdefgh12345678XYZ" = "x"']
)
def test_a_key_pasted_as_a_toml_key_is_refused_never_quoted(tmp_path: Path, line: str) -> None:
    """The unknown-key refusal quoted it in full (a review of the values' search)."""
    with pytest.raises(SpecError) as info:
        load_spec(write(tmp_path, GOOD.replace("rpm = 600", f"rpm = 600\n{line}", 1)),
                  arm_names=ARMS)
    assert "abcdefgh12345678" not in str(info.value), str(info.value)
    assert info.value.key == "models[0].<a key>"


@pytest.mark.parametrize(
    ("model", "key", "said"),
    [
        ('provider = "openai"\nmodel = "x"\nbase_url = "https://api.openai.com/v1"\n'
         'region = "us-east-1"', "region", "a key of bedrock models, not of openai"),
        ('provider = "groq"\nmodel = "openai/gpt-oss-120b"\nregion = "eu"', "region",
         "a key of bedrock models, not of groq"),
        ('provider = "bedrock"\nmodel = "m"\nlocation = "us-central1"', "location",
         "a key of vertex models, not of bedrock"),
        ('provider = "groq"\nmodel = "m"\napi_version = "2024-10-21"', "api_version",
         "a key of azure, vertex models, not of groq"),
        ('provider = "groq"\nmodel = "m"\npersonality = "noisy"', "personality",
         "a key of sim models, not of groq"),
        ('provider = "bedrock"\nmodel = "m"\ntoken_field = "max_tokens"', "token_field",
         "not of bedrock"),
    ],
)
def test_a_key_of_another_provider_is_refused(
    tmp_path: Path, model: str, key: str, said: str
) -> None:
    """It was taken and ignored: the run completed as if it were not there."""
    text = (
        'name = "k"\n[[models]]\nname = "m"\n' + model + '\n[[arms]]\nname = "baseline"\n'
    )
    spec = load_spec(write(tmp_path, text), arm_names=ARMS)  # a folder's frozen copy is read
    with pytest.raises(SpecError) as info:
        check_keys_read(spec)  # what a new run and `plan` ask
    assert info.value.key == f"models[0].{key}", info.value
    assert said in str(info.value), info.value


def test_a_sim_models_base_url_is_refused_for_a_new_run(tmp_path: Path) -> None:
    """Ignored: the run started its own simulator, and a serve-sim at this URL saw nothing."""
    text = GOOD.replace("rpm = 600", 'rpm = 600\nbase_url = "http://127.0.0.1:18765/sim/v1"', 1)
    spec = load_spec(write(tmp_path, text), arm_names=ARMS)
    with pytest.raises(SpecError) as info:
        check_keys_read(spec)
    assert info.value.key == "models[0].base_url", info.value
    assert 'not taken by provider "sim": a run starts its own simulator; for one already ' \
        "running (`dutchbook serve-sim`) remove base_url and run with --sim-url " \
        "http://127.0.0.1:PORT" in str(info.value), info.value


@pytest.mark.parametrize(
    "model",
    [
        'provider = "bedrock"\nmodel = "m"\nregion = "us-east-1"',
        'provider = "vertex"\nmodel = "m"\nproject = "p"\nlocation = "us-central1"\n'
        'api_version = "v1"',
        'provider = "azure"\nmodel = "m"\ndeployment = "d"\napi_version = "2024-10-21"',
        'provider = "sim"\nmodel = "sim-x"\npersonality = "noisy"',
        'provider = "groq"\nmodel = "m"\ntoken_field = "max_tokens"',
    ],
)
def test_a_key_of_the_models_provider_is_taken(tmp_path: Path, model: str) -> None:
    text = 'name = "k"\n[[models]]\nname = "m"\n' + model + '\n[[arms]]\nname = "baseline"\n'
    assert load_spec(write(tmp_path, text), arm_names=ARMS).models[0].name == "m"


EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize("example", ["figure1.toml", "atoms.json"])
def test_a_check_file_given_as_a_spec_names_the_command_for_it(example: str) -> None:
    """`plan examples/figure1.toml` said "variables: an unknown key; the known keys here:
    arms, ...", and `plan examples/atoms.json` "not valid TOML": neither named `check`."""
    path = EXAMPLES / example
    with pytest.raises(SpecError) as info:
        load_spec(path, arm_names=ARMS)
    assert info.value.key == "", info.value
    assert info.value.expected.startswith(
        "a set of probabilities for `dutchbook check`, not a campaign spec: "
        f"`dutchbook check {path}` checks it"
    ), info.value


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('{"name": "demo"}', "not valid TOML"),  # JSON, but no check file: a spec mistyped
        ("events = 1\n" + GOOD, "events: an unknown key"),  # a spec's own keys: a spec
        ('name = "x"\ncolour = 1\n', "colour: an unknown key"),
    ],
)
def test_a_spec_with_no_check_files_key_is_refused_as_before(
    tmp_path: Path, text: str, said: str
) -> None:
    with pytest.raises(SpecError, match=said):
        load_spec(write(tmp_path, text), arm_names=ARMS)


@pytest.mark.parametrize(
    ("provider", "takes", "not_listed"),
    [
        ("openai", ["temperature", "base_url_env", "token_field"],
         ["region", "project", "deployment", "personality", "api_version"]),
        ("bedrock", ["region", "batch_role_arn"], ["token_field", "base_url_env", "project"]),
        ("sim", ["personality", "token_field"], ["base_url", "base_url_env", "region"]),
    ],
)
def test_an_unknown_model_key_lists_the_keys_its_provider_takes(
    tmp_path: Path, provider: str, takes: list[str], not_listed: list[str]
) -> None:
    """The list was every provider's keys: `region`, `project`, `deployment`, ... on an
    openai model, which `check_keys_read` then refused on it."""
    text = (f'name = "k"\n[[models]]\nname = "m"\nprovider = "{provider}"\nmodel = "x"\n'
            'temprature = 0.5\n[[arms]]\nname = "baseline"\n')
    with pytest.raises(SpecError) as info:
        load_spec(write(tmp_path, text), arm_names=ARMS)
    assert info.value.key == "models[0].temprature"
    head, listed = info.value.expected.split(": ", 1)
    assert head == f"an unknown key; did you mean temperature? the keys {provider} models take"
    assert set(takes) <= set(listed.split(", ")), listed
    assert not set(not_listed) & set(listed.split(", ")), listed


def test_an_unknown_key_of_a_model_whose_provider_is_unknown_lists_every_key(
    tmp_path: Path,
) -> None:
    text = ('name = "k"\n[[models]]\nname = "m"\nprovider = "nope"\nmodel = "x"\n'
            'temprature = 0.5\n[[arms]]\nname = "baseline"\n')
    with pytest.raises(SpecError, match=r"the known keys here: .*region"):
        load_spec(write(tmp_path, text), arm_names=ARMS)
