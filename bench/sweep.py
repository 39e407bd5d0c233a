"""`make bench-sweep`: the paper's whole sweep rehearsed with faults and kills, then checked.

What it does (every figure printed comes from this one run):

1. Copies `runs/specs/paper.toml` into a temporary folder with three changes, all said aloud:
   a PLACEHOLDER headlines file (one made-up line per embedded stock-day, so the headline arm
   can be planned; no real headline is involved) and each provider's rate limits
   (`PROVIDER_LIMITS`: requests per minute and concurrency, scaled so the rehearsal fits in
   minutes; a real campaign uses its account's) and each request's answer-failure budget
   raised from 3 to `max_attempts` (`ANSWER_FAILURES`: the flaky profile makes about 0.8%
   of answers unusable, so three in a row on one of 365,100 requests is expected about once
   in six sweeps, and the engine then rightly gives that request up, which is not what the
   rehearsal tests). All 365,100 elicitations are planned.
2. Starts `dutchbook serve-sim --faults flaky` as its OWN process, enforcing the highest of
   those limits, so the faults it injects are counted across the kills of the run.
3. Runs `dutchbook run SPEC --rehearse --sim-url URL`, kills it with SIGKILL at three random
   moments of dispatch (seeded), resumes each time, and lets the last run finish, score and
   report.
4. Checks and prints: every planned query accepted exactly once (and paid for once); retries
   by cause against the faults the simulator injected (attempts in flight at a kill are
   recorded as `interrupted`, so the difference per cause is bounded by those); the audit
   sentence; wall time of planning, dispatch, scoring and report; queries per second; peak
   memory of each run's whole process tree, by run and by phase (the phase a sample belongs
   to is read from the laps the run appends to `logs/phases.jsonl`), and of the simulator.

`python -m bench.sweep --stock-days 4` runs the same at 4/100 scale while developing.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import orjson
import polars as pl
import psutil

REPO = Path(__file__).resolve().parent.parent
PAPER_SPEC = REPO / "runs" / "specs" / "paper.toml"
#: Requests per minute and concurrency per provider for the rehearsal (the workhorse, on
#: Groq, carries 345,500 of the 365,100 queries; the others share the rest).
PROVIDER_LIMITS: dict[str, tuple[int, int]] = {
    "groq": (120_000, 96),
    "deepinfra": (6_000, 16),
    "bedrock": (6_000, 16),
    "vertex": (6_000, 16),
    "azure": (6_000, 16),
}
#: The simulator's per-provider fault counts, and the wires that carry no refusal signal (a
#: refusal there is the model's own text), as the adapter tests hold them.
BY_PROVIDER = "fault_by_provider."
NO_REFUSAL_SIGNAL = ("groq", "deepinfra")
#: Seconds the simulator's injected 429s ask to wait: a 429 holds its whole lane that long.
RETRY_AFTER_S = 0.05
#: The rehearsal's `max_answer_failures` (a real campaign keeps its spec's, 3 by default):
#: equal to the default `max_attempts`, so only the overall attempt budget can give up.
ANSWER_FAILURES = 8
TARGET_SECONDS = 600.0
TARGET_MB = 500.0
PHASES = ("plan", "dispatch", "score", "report")


def dutchbook() -> str:
    return str(Path(sys.executable).with_name("dutchbook"))


# --------------------------------------------------------------------------- the spec


def write_placeholder_headlines(path: Path) -> int:
    """One made-up headline per (date, asset) of the embedded returns: a placeholder."""
    from panels.data import load_returns

    returns = load_returns(None).select("date", "asset")
    frame = returns.with_columns(
        pl.concat_str(
            [pl.lit("PLACEHOLDER headline (bench-sweep, not real news) for "), pl.col("asset"),
             pl.lit(" on "), pl.col("date").cast(pl.String)]
        ).alias("headline")
    )  # fmt: skip
    frame.write_csv(path)
    return frame.height


def write_spec(folder: Path, stock_days: int) -> Path:
    text = PAPER_SPEC.read_text(encoding="utf-8")
    text = text.replace("[data]\n", '[data]\nheadlines = "headlines.csv"\n', 1)
    text = re.sub(r"^stock_days = \d+", f"stock_days = {stock_days}", text, count=1, flags=re.M)

    def limits(match: re.Match[str]) -> str:
        rpm, concurrency = PROVIDER_LIMITS[match.group(1)]
        return f"{match.group(0)}\nrpm = {rpm}\nconcurrency = {concurrency}"

    text = re.sub(r'^provider = "(\w+)"$', limits, text, flags=re.M)
    # A top-level key goes before the first table.
    budget = f"max_answer_failures = {ANSWER_FAILURES}\n\n["
    text = re.sub(r"^\[", budget, text, count=1, flags=re.M)
    path = folder / "paper-rehearsal.toml"
    path.write_text(text, encoding="utf-8")
    return path


# --------------------------------------------------------------------------- processes


@dataclass
class RunRecord:
    killed_at: float | None  # share of the plan accepted when killed, None if let finish
    pid: int = 0
    exit_code: int = 0
    wall_s: float = 0.0
    peak_rss_mb: float = 0.0
    phases: dict[str, float] = field(default_factory=dict)
    #: Peak of the process tree in each phase the run reached (MB), in the run's order.
    phase_peaks_mb: dict[str, float] = field(default_factory=dict)

    def peaks_text(self) -> str:
        return ", ".join(f"{name} {mb:,.0f}" for name, mb in self.phase_peaks_mb.items())


def tree_rss(proc: psutil.Process) -> int:
    """Resident memory of a process and all its descendants, in bytes."""
    total = 0
    try:
        procs = [proc, *proc.children(recursive=True)]
    except psutil.Error:
        return 0
    for p in procs:
        try:
            total += p.memory_info().rss
        except psutil.Error:
            continue
    return total


class Sim:
    """`dutchbook serve-sim` as its own process; its counts are read when it stops."""

    def __init__(self, folder: Path, faults: str, seed: int, rpm: int) -> None:
        self.counts_file = folder / "sim-counts.json"
        self.log = (folder / "sim.log").open("w")
        self.proc = subprocess.Popen(
            [dutchbook(), "serve-sim", "--port", "0", "--faults", faults, "--seed", str(seed),
             "--rpm", str(rpm), "--retry-after", str(RETRY_AFTER_S),
             "--counts-file", str(self.counts_file)],
            stdout=subprocess.PIPE, stderr=self.log, text=True,
        )  # fmt: skip
        assert self.proc.stdout is not None
        self.url = ""
        for line in self.proc.stdout:
            found = re.search(r"http://127\.0\.0\.1:\d+", line)
            if found:
                self.url = found.group(0)
                break
        if not self.url:
            raise RuntimeError(f"the simulator did not start; see {self.log.name}")
        # Keep draining its stdout so it never blocks on a full pipe.
        threading.Thread(target=self.proc.stdout.read, daemon=True).start()
        self.peak_rss = 0
        self._ps = psutil.Process(self.proc.pid)

    def sample(self) -> None:
        self.peak_rss = max(self.peak_rss, tree_rss(self._ps))

    def stop(self) -> dict[str, int]:
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(timeout=60)
        self.log.close()
        counts: dict[str, int] = orjson.loads(self.counts_file.read_bytes())
        return counts


def progress(run_dir: Path) -> tuple[int, int]:
    """(done, planned) from the lanes' snapshot the run rewrites every second."""
    from engine.lanefile import read_lane_states

    states = read_lane_states(run_dir) or {}
    lanes = states.get("lanes", {}).values()
    return sum(s["done"] for s in lanes), sum(s["planned"] for s in lanes)


class PhaseWatch:
    """Which phase a run's process is in, from the laps it appends to `logs/phases.jsonl`:
    the phase after its last lap (`plan` until the first). Re-read only when the file grows."""

    def __init__(self, out: Path, pid: int) -> None:
        from runs.phases import PHASES_FILE

        self.path, self.pid = out / PHASES_FILE, pid
        self.size, self.done = -1, 0

    def current(self) -> str:
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            size = 0
        if size != self.size:
            from runs.phases import read_phases

            self.size = size
            self.done = sum(1 for line in read_phases(self.path.parent.parent)
                            if line.get("pid") == self.pid)  # fmt: skip
        return PHASES[min(self.done, len(PHASES) - 1)]


def run_once(spec: Path, out: Path, sim: Sim, kill_at: float | None, log: Path) -> RunRecord:
    record = RunRecord(killed_at=kill_at)
    t0 = time.monotonic()
    with log.open("a") as handle:
        handle.write(f"\n===== run (kill at {kill_at}) =====\n")
        handle.flush()
        proc = subprocess.Popen(
            [dutchbook(), "run", str(spec), "--rehearse", "--sim-url", sim.url, "--out",
             str(out)],
            stdout=handle, stderr=handle, start_new_session=True,
        )  # fmt: skip
        record.pid = proc.pid
        ps = psutil.Process(proc.pid)
        watch = PhaseWatch(out, proc.pid)
        peaks: dict[str, int] = {}
        lanes_file = out / "logs" / "lanes.json"
        started = lanes_file.stat().st_mtime if lanes_file.exists() else 0.0
        while proc.poll() is None:
            phase, rss = watch.current(), tree_rss(ps)
            peaks[phase] = max(peaks.get(phase, 0), rss)
            sim.sample()
            if kill_at is not None and lanes_file.exists() and lanes_file.stat().st_mtime > started:
                done, planned = progress(out)
                if planned and done >= kill_at * planned:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                    break
            time.sleep(0.1)
        record.exit_code = proc.returncode
    record.wall_s = time.monotonic() - t0
    record.phase_peaks_mb = {name: peaks[name] / 2**20 for name in PHASES if name in peaks}
    record.peak_rss_mb = max(peaks.values(), default=0) / 2**20
    return record


# --------------------------------------------------------------------------- checks


def intended_by_cause(
    counts: dict[str, int], timeout_s: float, slow_delay_s: float
) -> Counter[str]:
    """The retry each injected fault should cause, by the simulator's own promise."""
    from providers.sim.faults import INTENDED_OUTCOME, FaultKind

    expected: Counter[str] = Counter()
    for key, n in counts.items():
        if not key.startswith(BY_PROVIDER):
            continue
        provider, _, name = key.removeprefix(BY_PROVIDER).partition(".")
        kind = FaultKind(name)
        if kind is FaultKind.SLOW and slow_delay_s < timeout_s:
            continue  # answered correctly, only late: not a retry
        if kind is FaultKind.REFUSAL and provider in NO_REFUSAL_SIGNAL:
            expected["invalid_response"] += n  # the refusal is the model's text: unparseable
            continue
        expected[INTENDED_OUTCOME[kind].value] += n
    expected["rate_limit"] += counts.get("rate_limiter.429", 0)  # its own limiter's 429s
    return expected


def check_exactly_once(out: Path) -> tuple[int, int, int]:
    """(planned, accepted distinct, ok attempts distinct), each of which must be equal."""
    from engine.scan import scan_attempts, scan_responses

    planned = pl.scan_parquet(out / "plan.parquet").select(pl.len()).collect().item()
    responses = (
        scan_responses(out, ["request_id"])
        .select(pl.len().alias("rows"), pl.col("request_id").n_unique().alias("ids"))
        .collect()
    )
    oks = (
        scan_attempts(out, ["request_id", "outcome"])
        .filter(pl.col("outcome") == "ok")
        .select(pl.len().alias("rows"), pl.col("request_id").n_unique().alias("ids"))
        .collect()
    )
    if responses["rows"].item() != responses["ids"].item():
        raise AssertionError("a request has two accepted answers")
    if oks["rows"].item() != oks["ids"].item():
        raise AssertionError("a request was paid for twice (two ok attempts)")
    return planned, responses["ids"].item(), oks["ids"].item()


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench-sweep", description=__doc__.split("\n\n")[0])
    parser.add_argument("--stock-days", type=int, default=100, help="100 is the paper's scale")
    parser.add_argument("--kills", type=int, default=3)
    parser.add_argument("--faults", default="flaky")
    parser.add_argument("--seed", type=int, default=20261201)
    parser.add_argument("--keep", type=Path, default=None, help="work in this folder and keep it")
    args = parser.parse_args(argv)

    t_start = time.monotonic()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="dutchbook-sweep-"))
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / "run"
    rows = write_placeholder_headlines(folder / "headlines.csv")
    spec = write_spec(folder, args.stock_days)
    print(f"bench-sweep: {spec} (paper.toml, stock_days = {args.stock_days})")
    print(
        f"  headline arm: a PLACEHOLDER headlines file ({rows:,} made-up lines, one per embedded "
        "stock-day) stands in for real news, so the arm can be planned and rehearsed"
    )
    print("  rate limits (rpm, concurrency) per provider: "
          + ", ".join(f"{p} {r:,}/{c}" for p, (r, c) in PROVIDER_LIMITS.items()))  # fmt: skip
    print(f"  answer-failure budget per request: {ANSWER_FAILURES} (paper.toml: 3), so random "
          "faults do not give a request up")  # fmt: skip
    print(f"  faults: {args.faults} (injected 429s ask for {RETRY_AFTER_S}s); "
          f"{args.kills} SIGKILLs at random moments of dispatch; "
          f"work folder {folder}")  # fmt: skip

    sim_rpm = max(r for r, _ in PROVIDER_LIMITS.values())
    sim = Sim(folder, args.faults, args.seed, sim_rpm)
    rng = random.Random(args.seed)
    moments = sorted(rng.uniform(0.05, 0.9) for _ in range(args.kills))
    records: list[RunRecord] = []
    log = folder / "runs.log"
    try:
        for moment in [*moments, None]:
            record = run_once(spec, out, sim, moment, log)
            records.append(record)
            state = "killed" if moment is not None else f"exit {record.exit_code}"
            print(f"  run {len(records)}: {state}"
                  + (f" at {moment:.0%} accepted" if moment is not None else "")
                  + f" after {record.wall_s:.1f}s, peak {record.peak_rss_mb:,.0f} MB"
                  + f" (by phase: {record.peaks_text()})")  # fmt: skip
    finally:
        counts = sim.stop()
    dispatch_end = time.monotonic()

    from engine.audit import audit
    from runs.phases import read_phases

    by_pid: dict[int, dict[str, float]] = {}
    for line in read_phases(out):
        laps = by_pid.setdefault(int(str(line["pid"])), {})
        laps[str(line["phase"])] = float(str(line["seconds"]))
    totals = dict.fromkeys(PHASES, 0.0)
    for record in records:
        laps = by_pid.get(record.pid, {})
        if record.killed_at is not None and "dispatch" not in laps:
            # Killed in dispatch: no lap was written; it ran from the plan lap to the kill
            # (process start-up, a second or so, is counted in it).
            laps = {**laps, "dispatch": max(record.wall_s - laps.get("plan", 0.0), 0.0)}
        record.phases = laps
        for name in PHASES:
            totals[name] += laps.get(name, 0.0)

    failures: list[str] = []
    planned, accepted, oks = check_exactly_once(out)
    planned_total = planned
    once = planned == accepted == oks
    if not once:
        failures.append("not every planned query was accepted exactly once")
    print(f"\nexactly once: {planned:,} planned, {accepted:,} accepted (distinct, none twice), "
          f"{oks:,} paid ok attempts (none twice): {'OK' if once else 'FAILED'}")  # fmt: skip

    result = audit(out)
    recorded = {c: n for c, n in result.totals.retries_by_cause.items() if n}
    expected = intended_by_cause(counts, timeout_s=120.0, slow_delay_s=5.0)
    interrupted = recorded.get("interrupted", 0)
    print("\nretries by cause: recorded in the ledger vs the faults the simulator injected")
    print(f"  {'cause':<26}{'injected':>10}{'recorded':>10}{'missing':>9}")
    missing_total = 0
    for cause in sorted(set(expected) | set(recorded)):
        if cause == "interrupted":
            continue
        diff = expected.get(cause, 0) - recorded.get(cause, 0)
        missing_total += diff
        print(f"  {cause:<26}{expected.get(cause, 0):>10,}{recorded.get(cause, 0):>10,}{diff:>9,}")
        if diff < 0:
            failures.append(f"{cause}: more retries recorded than faults injected")
    print(f"  {'interrupted (killed)':<26}{'':>10}{interrupted:>10,}")
    if missing_total == 0:
        print("  every injected fault is one recorded retry of its cause: exact")
    elif 0 < missing_total <= interrupted:
        print(f"  {missing_total:,} injected faults hit attempts in flight at a kill; the ledger "
              f"records those {interrupted:,} attempts as `interrupted` (their cause never "
              "reached it): reconciled")  # fmt: skip
    else:
        failures.append(f"retries and injected faults differ by {missing_total} "
                        f"(interrupted {interrupted})")  # fmt: skip
    limiter = counts.get("rate_limiter.429", 0)
    print(f"  the simulator's own rate limiter refused {limiter:,} requests "
          "(0: the engine kept every limit)")  # fmt: skip

    print(f"\naudit: {result.sentence}")

    total_s = time.monotonic() - t_start
    dispatch_s = totals["dispatch"]
    peak_mb = max(r.peak_rss_mb for r in records)
    print("\nwall time by phase (all runs together):")
    for name in PHASES:
        print(f"  {name:<9}{totals.get(name, 0.0):>8.1f} s")
    print(f"  whole command {total_s:.1f} s (runs {dispatch_end - t_start:.1f} s)")
    rate = planned_total / max(dispatch_s, 1e-9)
    print(f"queries per second (planned / dispatch time): {rate:,.0f}")
    print(f"peak memory of a run's process tree: {peak_mb:,.0f} MB "
          f"(by run: {', '.join(f'{r.peak_rss_mb:,.0f}' for r in records)}); "
          f"the simulator process: {sim.peak_rss / 2**20:,.0f} MB")  # fmt: skip
    by_phase = {name: max((r.phase_peaks_mb.get(name, 0.0) for r in records), default=0.0)
                for name in PHASES}  # fmt: skip
    print("peak memory by phase (the highest of any run): "
          + ", ".join(f"{name} {mb:,.0f} MB" for name, mb in by_phase.items() if mb))  # fmt: skip
    if args.stock_days == 100:
        time_ok, mem_ok = total_s < TARGET_SECONDS, peak_mb < TARGET_MB
        print(f"targets: under {TARGET_SECONDS / 60:.0f} min {'MET' if time_ok else 'MISSED'}, "
              f"under {TARGET_MB:.0f} MB {'MET' if mem_ok else 'MISSED'}")  # fmt: skip
    if records[-1].exit_code != 0:
        failures.append(f"the last run exited {records[-1].exit_code} (see {log})")
    for failure in failures:
        print(f"FAILED: {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
