"""Start-up of the `dutchbook` command against a bare interpreter (`python -c pass`).

Issue 12's target is under 0.5 s for `dutchbook --help` and for `dutchbook check` on
Figure 1. The machine is shared, so the three commands take turns for `ROUNDS` rounds
and the medians are compared: the ratio to `python -c pass` is the figure that travels
between machines, the absolute medians say how far from the target this one was.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

ROUNDS = 9
ROOT = Path(__file__).resolve().parent.parent
TARGET_S = 0.5


def _command() -> list[str]:
    """The installed console script beside this interpreter, else the module's entry point."""
    script = Path(sys.executable).parent / "dutchbook"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "from runs.cli import main; main()"]


def _seconds(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, cwd=ROOT, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    cases = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "dutchbook --help": [*_command(), "--help"],
        "dutchbook check examples/figure1.toml": [*_command(), "check", "examples/figure1.toml"],
    }
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(ROUNDS):
        for name, argv in cases.items():
            times[name].append(_seconds(argv))
    median = {name: statistics.median(values) for name, values in times.items()}
    base = median["python -c pass"]
    print(f"bench.startup: medians of {ROUNDS} interleaved runs; target < {TARGET_S} s")
    for name in list(cases)[1:]:
        verdict = "met" if median[name] < TARGET_S else "MISSED"
        print(
            f"{name}: {median[name]:.3f} s = {median[name] / base:.1f}x python -c pass "
            f"({base:.3f} s) | target {verdict}"
        )


if __name__ == "__main__":
    main()
