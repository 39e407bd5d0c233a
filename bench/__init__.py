"""dutchbook benchmarks; run with `make bench`."""
