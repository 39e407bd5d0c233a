"""`make bench-batch`: a batch-mode campaign rehearsed with batch faults and kills, then checked.

Issue 13's done-when: a 20,000-query campaign in batch mode across the five providers,
killed three times at random moments (one of them between an upload and its job's
creation), ends with every query accepted exactly once, no request in two live jobs, and an
audit that reconciles with the faults the simulator injected. What it does:

1. Writes a spec of one model per provider (Groq, DeepInfra, Azure, Bedrock, Vertex), each
   `dispatch = "batch"`, on the embedded stock-days and the baseline arm (96 stock-days x 3
   passes x 5 models = 20,160 queries), with jobs lowered to `batch_max_lines` lines and
   `batch_max_jobs` in flight so the campaign makes dozens of jobs, not five. Models whose
   provider has no batch client yet are left out, and the output says so.
2. Starts `dutchbook serve-sim` as its OWN process with batch faults (jobs that expire half
   done, fail validation, or whose create reply is late; error lines; 5xx and 429 lines;
   files and batches calls refused with a 429 or a 5xx, which the engine waits out) and
   compressed time (a job lives `batch_seconds`), so its counts span every kill.
3. Runs `dutchbook run SPEC --rehearse --sim-url URL` and SIGKILLs it three times: at a
   random share of the plan accepted, then BETWEEN AN UPLOAD AND ITS CREATE (that run waits
   `DUTCHBOOK_TEST_BATCH_UPLOAD_PAUSE_S` after recording each upload; the kill lands when the
   run folder's job records show a job uploaded and not created and the simulator's gauge
   shows an input file no job uses yet), then at another random share; resumes each time.
4. Checks and prints: every query accepted exactly once; per provider, lines the simulator
   answered (paid) = ok attempts recorded (where Bedrock's few re-asked lines went live, a
   live request in flight at a kill may have been answered too: at most the `interrupted`
   attempts more); no request in two live jobs (the job records replayed in order); no job created
   twice (simulator jobs = jobs recorded created); the job caught between upload and create
   created once after the resume; retries by cause against the faults injected.

`python -m bench.batch --stock-days 4 --passes 1` runs the same at small scale (the test).
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from bench.sweep import Sim, check_exactly_once, dutchbook, progress

#: One model per provider (the paper's models), each asked through its batch API.
MODELS: dict[str, str] = {
    "groq": 'name = "gpt-oss-120b"\nprovider = "groq"\nmodel = "openai/gpt-oss-120b"',
    "deepinfra": 'name = "qwen3-235b"\nprovider = "deepinfra"\nmodel = "Qwen/Qwen3-235B-A22B"',
    "azure": 'name = "gpt-5.6-luna"\nprovider = "azure"\nmodel = "gpt-5.6-luna"\n'
             'api_version = "2025-04-01-preview"',
    "bedrock": 'name = "claude-sonnet-5"\nprovider = "bedrock"\n'
               'model = "us.anthropic.claude-sonnet-5-v1:0"\nregion = "us-east-1"\n'
               'batch_bucket = "s3://dutchbook-rehearsal/batch"\n'
               'batch_role_arn = "arn:aws:iam::123456789012:role/dutchbook-batch"\n'
               # Bedrock jobs have a floor of lines: a few re-asked lines go live.
               'batch_fallback = "live"',
    "vertex": 'name = "gemini-3.5-flash"\nprovider = "vertex"\nmodel = "gemini-3.5-flash"\n'
              'project = "rehearsal"\nlocation = "us-central1"\n'
              'batch_bucket = "gs://dutchbook-rehearsal/batch"',
}
FAULTS = (
    "batch_seconds=1.5,batch_create_delay_s=1.0,batch_expire=0.12,batch_invalid=0.06,"
    "batch_create_delay=0.1,batch_line_error=0.01,server_error=0.01,rate_limit=0.01,"
    "batch_control_rate_limit=0.05,batch_control_error=0.03"
)
#: The simulator's own limiter is set out of reach: a control-plane call it refused would be
#: waited out by the engine, never recorded as an attempt, and the audit would not show it.
SIM_RPM = 10_000_000
POLL_S = 0.2
UPLOAD_PAUSE_S = 1.5


def batch_providers() -> list[str]:
    """The providers of `MODELS` that have a batch client on this checkout."""
    from providers.batch_registry import BATCH_MODULES

    return [p for p in MODELS if p in BATCH_MODULES]


def write_spec(folder: Path, providers: list[str], stock_days: int, passes: int,
               max_lines: int, max_jobs: int) -> Path:
    from providers.batch_bedrock import LIMITS as BEDROCK

    least = BEDROCK.least_max_lines
    models = "\n".join(
        f"[[models]]\n{MODELS[p]}\ndispatch = \"batch\"\n"
        # Bedrock's jobs hold at least 100 records (its documented floor), and a cap below
        # 199 can leave a remainder below it (`runs.spec.check_batch_floor` refuses one).
        f"batch_max_lines = {max(max_lines, least) if p == 'bedrock' else max_lines}\n"
        f"batch_max_jobs = {max_jobs}\nmax_tokens = 400\n"
        for p in providers
    )
    text = (
        # 16 attempts: a line retried alone in a job that expires is not run (an expired job
        # runs the first half of its lines), about a third of its tries, so 8 left a line
        # unanswered, and the rehearsal incomplete, in about 3e-4 of small runs.
        f'name = "batch-rehearsal"\nseed = 20261201\nparser = "lenient"\nmax_attempts = 16\n\n'
        f"[data]\nstock_days = {stock_days}\n\n{models}\n"
        f'[[arms]]\nname = "baseline"\npasses = {passes}\n'
    )
    path = folder / "batch-rehearsal.toml"
    path.write_text(text, encoding="utf-8")
    return path


def sim_counts(url: str) -> dict[str, int]:
    from providers.sim.server import read_live_counts

    return read_live_counts(url) or {}


def uploaded_not_created(out: Path) -> list[str]:
    from engine.batch_jobs import UPLOADED, fold_jobs

    return [k for k, job in fold_jobs(out).items() if job.step == UPLOADED]


@dataclass
class Kill:
    how: str  # "share" (of the plan accepted) or "window" (between upload and create)
    share: float = 0.0
    caught: tuple[str, ...] = ()  # job keys this run uploaded and had not created at the kill
    before: frozenset[str] = frozenset()  # keys left uploaded by an earlier kill
    wall_s: float = 0.0
    exit_code: int = 0


def run_once(spec: Path, out: Path, sim: Sim, kill: Kill | None, log: Path) -> Kill:
    record = kill or Kill("none")
    env = dict(os.environ, DUTCHBOOK_BATCH_POLL_S=str(POLL_S))
    if kill is not None and kill.how == "window":
        env["DUTCHBOOK_TEST_BATCH_UPLOAD_PAUSE_S"] = str(UPLOAD_PAUSE_S)
        if (out / "batches" / "jobs.jsonl").exists():
            kill.before = frozenset(uploaded_not_created(out))
    t0 = time.monotonic()
    with log.open("a") as handle:
        handle.write(f"\n===== run ({record}) =====\n")
        handle.flush()
        proc = subprocess.Popen(
            [dutchbook(), "run", str(spec), "--rehearse", "--sim-url", sim.url, "--out",
             str(out)],
            stdout=handle, stderr=handle, start_new_session=True, env=env,
        )  # fmt: skip
        while proc.poll() is None:
            if kill is not None and _due(kill, out, sim):
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                if kill.how == "window":
                    kill.caught = tuple(sorted(set(uploaded_not_created(out)) - kill.before))
                break
            time.sleep(0.02 if kill is not None and kill.how == "window" else 0.1)
        record.exit_code = proc.returncode
    record.wall_s = time.monotonic() - t0
    return record


def _due(kill: Kill, out: Path, sim: Sim) -> bool:
    if kill.how == "window":  # a job THIS run uploaded, not yet created at the simulator
        if not (out / "batches" / "jobs.jsonl").exists():
            return False
        if not set(uploaded_not_created(out)) - kill.before:
            return False
        return sim_counts(sim.url).get("batch.input_files_without_batch", 0) > 0
    done, planned = progress(out)
    return bool(planned) and done >= kill.share * planned


# --------------------------------------------------------------------------- checks


def replay_jobs(out: Path) -> tuple[int, int, set[str]]:
    """(most live jobs at once, requests ever in two live jobs, keys created) from the
    records in the order written."""
    from engine.batch_jobs import COLLECTED, CREATED, JOBS_FILE, PLANNED
    from engine.durable import read_record_lines

    live: dict[str, set[str]] = {}
    most, clashes, created = 0, 0, set()
    ids: dict[str, str] = {}
    for record in read_record_lines(out / JOBS_FILE):
        key = record["job_key"]
        if record["event"] == PLANNED:
            carried = set(record["requests"])
            clashes += sum(len(carried & other) for other in live.values())
            live[key] = carried
            most = max(most, len(live))
        elif record["event"] == CREATED:
            if ids.setdefault(key, record["job_id"]) != record["job_id"]:
                clashes += 1  # one key, two provider jobs
            created.add(key)
        elif record["event"] == COLLECTED:
            live.pop(key, None)
    return most, clashes, created


def expected_by_cause(counts: dict[str, int], out: Path) -> tuple[Counter[str], int]:
    """The failed attempts the injected faults should have made, by cause, and the failed
    jobs the records show: each line fault as the simulator promises (`expected_failures`),
    each line an expired job never ran a `timeout`, each line of a job that failed validation
    a `provider_error` (the simulator counts those jobs; their lines come from the records)."""
    from engine.batch_jobs import fold_jobs
    from providers.batch import JobStatus
    from providers.sim.faults import expected_failures

    expected: Counter[str] = Counter(expected_failures(counts))
    expected["timeout"] += counts.get("batch.lines_unrun", 0)
    failed = [j for j in fold_jobs(out).values() if j.status is JobStatus.FAILED]
    expected["provider_error"] += sum(len(j.requests) for j in failed)
    return +expected, len(failed)


def paid_once(out: Path, counts: dict[str, int], failures: list[str]) -> None:
    """Per provider, lines the simulator answered against ok attempts recorded: equal where
    every attempt went through batch jobs (a line collected after a kill is never run
    again); where some went live (Bedrock's fallback), a live request in flight at a kill was
    answered but never recorded (`interrupted`), so those may exceed by at most that many."""
    import polars as pl

    from engine.scan import scan_attempts
    from engine.spend import carried_by_batch

    attempts = scan_attempts(out, ["provider", "outcome", "detail"]).collect()
    for provider in sorted({k.split(".", 1)[1] for k in counts if k.startswith("answered.")}):
        mine = attempts.filter(pl.col("provider") == provider)
        oks = mine.filter(pl.col("outcome") == "ok").height
        live = mine.filter(~carried_by_batch()).height
        lost = mine.filter(pl.col("outcome") == "interrupted").height
        answered = counts[f"answered.{provider}"]
        extra = answered - oks
        ok = extra == 0 or (live > lost and 0 < extra <= lost)
        print(f"paid once, {provider}: the simulator answered {answered:,}, {oks:,} ok attempts"
              + (f" ({live - lost:,} live attempts, {lost} interrupted by kills)" if live > lost
                 else "") + f": {'OK' if ok else 'FAILED'}")
        if not ok:
            failures.append(f"{provider}: {answered} answered but {oks} ok attempts recorded")


def report(out: Path, counts: dict[str, int], kills: list[Kill], failures: list[str]) -> None:
    from engine.audit import audit
    from engine.scan import scan_attempts
    from engine.spend import carried_by_batch

    planned, accepted, oks = check_exactly_once(out)
    once = planned == accepted == oks
    print(f"\nexactly once: {planned:,} planned, {accepted:,} accepted (distinct, none twice), "
          f"{oks:,} ok attempts (none twice): {'OK' if once else 'FAILED'}")  # fmt: skip
    if not once:
        failures.append("not every planned query was accepted exactly once")
    paid_once(out, counts, failures)
    most, clashes, created = replay_jobs(out)
    sim_jobs = counts.get("batch.jobs_created", 0)
    print(f"jobs: {len(created):,} created (the simulator counts {sim_jobs:,}), at most "
          f"{most} live at once; requests in two live jobs: {clashes}: "
          f"{'OK' if clashes == 0 and sim_jobs == len(created) else 'FAILED'}")
    if clashes or sim_jobs != len(created):
        failures.append(f"{clashes} requests in two live jobs; {sim_jobs} simulator jobs for "
                        f"{len(created)} recorded")
    window = [k for k in kills if k.how == "window"]
    for kill in window:
        ok = bool(kill.caught) and set(kill.caught) <= created
        print(f"killed between upload and create: {len(kill.caught)} job(s) the run uploaded "
              f"and had not created ({', '.join(kill.caught) or 'none'}); each created once "
              f"after the resume: {'OK' if ok else 'FAILED'}")
        if not ok:
            failures.append("the kill did not land between an upload and its create")

    result = audit(out)
    recorded = {c: n for c, n in result.totals.retries_by_cause.items() if n}
    expected, failed_jobs = expected_by_cause(counts, out)
    sim_failed = counts.get("fault.batch_invalid", 0)
    if failed_jobs != sim_failed:
        failures.append(f"{failed_jobs} failed jobs recorded, the simulator failed {sim_failed}")
    print("\nretries by cause: recorded in the ledger vs the faults the simulator injected")
    print(f"  {'cause':<22}{'injected':>10}{'recorded':>10}")
    for cause in sorted(set(expected) | set(recorded)):
        if cause == "interrupted":
            continue
        exp, rec = expected.get(cause, 0), recorded.get(cause, 0)
        print(f"  {cause:<22}{exp:>10,}{rec:>10,}{'' if exp == rec else '  MISMATCH':>10}")
        if exp != rec:
            failures.append(f"{cause}: {exp} injected, {rec} recorded")
    interrupted = recorded.get("interrupted", 0)
    print(f"  {'interrupted (killed)':<22}{'':>10}{interrupted:>10,}")
    injected = [f"{k} {v:,}" for k, v in sorted(counts.items()) if k.startswith("fault.")]
    print(f"  faults: {', '.join(injected)}")
    print(f"  jobs: {counts.get('batch.jobs.completed', 0):,} completed, "
          f"{counts.get('batch.jobs.expired', 0):,} expired ({counts.get('batch.lines_unrun', 0):,}"
          f" lines unrun), {sim_failed:,} failed validation ({failed_jobs} recorded)")
    control = {k.removeprefix("fault."): n for k, n in counts.items()
               if k.startswith("fault.batch_control")}
    if control:
        print(f"  control-plane calls refused (files and batches, waited out and retried, never "
              f"an attempt): {', '.join(f'{k} {n:,}' for k, n in sorted(control.items()))}")
    lines = scan_attempts(out, ["detail"]).filter(carried_by_batch()).collect().height
    print(f"  {lines:,} attempts came from batch result lines")
    print(f"\naudit: {result.sentence}")


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench-batch", description=__doc__.split("\n\n")[0])
    parser.add_argument("--stock-days", type=int, default=96)
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--max-lines", type=int, default=500)
    parser.add_argument("--max-jobs", type=int, default=4)
    parser.add_argument("--faults", default=FAULTS)
    parser.add_argument("--seed", type=int, default=20261201)
    parser.add_argument("--keep", type=Path, default=None, help="work in this folder and keep it")
    args = parser.parse_args(argv)

    t_start = time.monotonic()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="dutchbook-batch-"))
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / "run"
    providers = batch_providers()
    missing = [p for p in MODELS if p not in providers]
    spec = write_spec(folder, providers, args.stock_days, args.passes, args.max_lines,
                      args.max_jobs)
    print(f"bench-batch: {spec} ({len(providers)} models, dispatch = \"batch\": "
          f"{', '.join(providers)}; stock_days {args.stock_days}, {args.passes} passes; jobs of "
          f"at most {args.max_lines} lines, {args.max_jobs} in flight per model)")
    if missing:
        print(f"  NOT REHEARSED: {', '.join(missing)} (no batch client on this checkout)")
    print(f"  faults: {args.faults}; polls every {POLL_S}s; work folder {folder}")

    sim = Sim(folder, args.faults, args.seed, SIM_RPM)
    rng = random.Random(args.seed)
    first, last = sorted(rng.uniform(0.1, 0.8) for _ in range(2))
    plan = [Kill("share", first), Kill("window"), Kill("share", last), None]
    kills: list[Kill] = []
    log = folder / "runs.log"
    try:
        for kill in plan:
            record = run_once(spec, out, sim, kill, log)
            if kill is not None:
                kills.append(record)
            what = ("let finish: exit " + str(record.exit_code) if kill is None else
                    f"killed at {kill.share:.0%} accepted" if kill.how == "share" else
                    "killed between upload and create")
            print(f"  run {len(kills) + (kill is None)}: {what} after {record.wall_s:.1f}s")
            last_exit = record.exit_code
    finally:
        counts = sim.stop()
    failures: list[str] = []
    report(out, counts, kills, failures)
    print(f"\nwhole command {time.monotonic() - t_start:.1f} s")
    if last_exit != 0:
        failures.append(f"the last run exited {last_exit} (see {log})")
    if missing:
        print(f"NOT DONE: the done-when asks for all five providers; missing {', '.join(missing)}")
    for failure in failures:
        print(f"FAILED: {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
