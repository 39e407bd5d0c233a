"""Suite-wide settings. Area fixtures live in each test folder's own conftest.py."""

from hypothesis import HealthCheck, settings

# CI machines are small and shared: keep property tests deterministic and bounded.
settings.register_profile(
    "ci", max_examples=60, deadline=None, derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("ci")
