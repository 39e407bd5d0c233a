"""Run every benchmark in one process so ratios compare like with like."""

from __future__ import annotations

import importlib

BENCHMARKS = ("bench.startup", "bench.lp", "bench.dispatch", "bench.whole_run")


def main() -> None:
    for name in BENCHMARKS:
        module = importlib.import_module(name)
        module.main()


if __name__ == "__main__":
    main()
