"""What dispatch's lanes and `status` both count a lane by, defined once.

`engine.lanes.LaneStats` counts a lane's time left and the requests it gave up from its own
fields while the run goes; `engine.status` counts them from what `logs/lanes.json` last said
of it (`engine.lanefile`). Each had its own copy of the formula; here is the one both use,
importing nothing, so that neither module imports the other.
"""

from __future__ import annotations

#: A lane's counts of the requests it gave up this run, by why, as `lanes.json` keeps them
#: (`LaneStats.gave_up_counts`): summed, they are `LaneStats.given_up`, and `status`'s
#: `lane_gave_up` read back from the file.
GAVE_UP_KEYS = (
    "gave_up_after_max_attempts", "gave_up_answer_budget_spent", "gave_up_permanent"
)
#: The states (`engine.lanes.LaneState` values) of a lane that may still ask: the others are
#: done, halted (stopped, paused, cancelled) or waiting out its provider's outage (probing).
ASKING_STATES = ("waiting", "running")


def time_left_s(
    state: str | None,
    remaining: int,
    rate_per_s: float | None,
    held_s: float | None,
    limit_rate_per_s: float | None = None,
) -> float | None:
    """A lane's time left in seconds: what is left of its provider's hold (`held_s`), then its
    `remaining` requests at `rate_per_s`, or at `limit_rate_per_s` where that is slower (the
    most its own `rpm` and `tpm` allow, `LaneStats.limit_rate_per_s`): the rate observed
    leaves the provider's holds out, and a lane's first answers may come faster than its
    limits let the rest come, so 140 queries at rpm 2 said 26 minutes left where `plan` said,
    rightly, 70. 0 once it is done, though it gave requests up (its "ETA ?" kept a campaign's
    time left unknown for good), or has nothing left; None (not known) before a first answer
    (no rate), while its provider is down (`probing`), once it halted (it asks nothing more
    this run) or when its state is not known (no `lanes.json`). The live table's
    (`LaneStats.eta_s`) and `status`'s (`engine.status.lane_eta_s`), alike."""
    if state == "done":
        return 0.0
    if state not in ASKING_STATES:
        return None
    if remaining <= 0:
        return 0.0
    if not rate_per_s or rate_per_s <= 0:
        return None
    if limit_rate_per_s and limit_rate_per_s > 0:
        rate_per_s = min(rate_per_s, limit_rate_per_s)
    return (held_s or 0.0) + remaining / rate_per_s
