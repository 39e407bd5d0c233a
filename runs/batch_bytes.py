"""The bytes of the batch lines a model's jobs would hold, for `runs.spec.check_batch_bytes`.

A `batch_max_bytes` too small for a provider's floor of lines a job (Bedrock's 100) cut jobs
the provider refuses at creation: `batch_max_bytes = 50000` made jobs of 21 lines of a
rehearsal's 224 Bedrock queries, after the run had started. Whether a cap is too small
depends on how long the lines are, known only once the prompts are rendered, so the check
sizes them then: a new run's as `runs.planner.estimate` renders them (`PlannedSizes`, which
`dutchbook plan` uses too), a resume's from its folder's plan (`left_sizes`), before the
design is frozen and before any job is planned. Only models `byte_capped_batch_models`
names are sized: a provider's own byte limit holds any floor's worth of lines.
"""

from __future__ import annotations

from pathlib import Path

from engine.batch_lane import line_sizes, next_line
from engine.plan import PlanItem
from providers.batch import BatchClient
from providers.batch_registry import batch_client_for
from providers.types import ModelConfig
from runs.leftovers import scratch_folder
from runs.model_options import built_with_stand_ins
from runs.planner import PlannedQuery
from runs.spec import CampaignSpec, byte_capped_batch_models


def sizing_client(model: ModelConfig) -> BatchClient:
    """A batch client of `model` that writes its lines, built with no credential of the
    user's: as a rehearsal builds it (`runs.model_options.built_with_stand_ins`, pointed at
    a simulator nothing is ever sent to: a client builds lines offline), which changes only
    where requests go and what signs them, never a line (a Bedrock record is its record id
    and Converse body). The folder a rehearsal's service-account file would go in (Vertex's)
    is gone once the client is built: writing a line reads no credential."""
    with scratch_folder("sim") as workdir:
        config, env = built_with_stand_ins(model, True, Path(workdir))
        return batch_client_for(config, env)


def answer_budget(spec: CampaignSpec) -> int:
    """The answer-failure budget a dispatch of `spec` gives each request (`dispatch`'s)."""
    return min(spec.max_answer_failures, spec.max_attempts)


class PlannedSizes:
    """The bytes of each batch line of the models `byte_capped_batch_models` names, added as
    `runs.planner.estimate` renders their queries (its `on_query`): `sizes` by model name,
    for `check_batch_bytes`. `on_query` is None where no model is sized."""

    def __init__(self, spec: CampaignSpec) -> None:
        self._clients = {
            name: sizing_client(spec.model(name)) for name in byte_capped_batch_models(spec)
        }
        self._budget = answer_budget(spec)
        self.sizes: dict[str, list[int]] = {name: [] for name in self._clients}
        self.on_query = self.add if self._clients else None

    def add(self, pq: PlannedQuery) -> None:
        client = self._clients.get(pq.model.name)
        if client is None:
            return
        query = pq.query
        item = PlanItem(pq.request_id, pq.model.name, pq.arm, pq.unit, list(query.events),
                        list(query.keys), pq.pass_index, pq.seed, query.system, query.user)
        line = next_line(client, pq.model, item, self._budget)
        self.sizes[pq.model.name].append(len(line))


def left_sizes(
    spec: CampaignSpec, run_dir: Path, plan_path: Path,
    simulated_here: frozenset[str] = frozenset(),
) -> dict[str, list[int]]:
    """By model `byte_capped_batch_models` names, the bytes of each line a resume of `run_dir`
    would cut into new jobs (`engine.batch_lane.line_sizes`): the lines of the jobs it asks
    again among them (`engine.batch_lane.asked_again`), those of a simulator inside an
    earlier run where `simulated_here` names the model (a rehearsal without --sim-url), but
    not those it gives up at once (the spec's `max_attempts = 1`)."""
    budget = answer_budget(spec)
    return {
        name: line_sizes(run_dir, plan_path, spec.model(name), sizing_client(spec.model(name)),
                         budget, simulated_here=name in simulated_here,
                         max_attempts=spec.max_attempts)
        for name in byte_capped_batch_models(spec)
    }  # fmt: skip
