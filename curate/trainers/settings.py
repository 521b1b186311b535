"""Dynamic-sampling settings for trainers, from the mixed-group share at their group size.

Trainers with dynamic sampling (DAPO's group filtering) throw away every group whose
rewards are all equal and generate again until a training batch of B informative groups
is full. Whether a step fills in one round, several, or never depends on p, the share of
groups that are mixed at the trainer's group size G: exactly the report's
"mixed groups at G" figure (`curate.stats.mixed.mixed_probability` averaged over samples).

The model: a generation round draws g prompts; each prompt's group is mixed with the
data set's average probability p (exact when prompts are drawn with replacement: a
random prompt's group is mixed with probability p whatever the spread of p over
prompts), so after r rounds the mixed groups number K_r ~ Binomial(r*g, p).

- A trainer that stops after M rounds (verl's `max_num_gen_batches`, NeMo-RL's
  `dynamic_sampling_max_gen_batches`) fails a step with probability
  P(K_M < B): the stall risk.
- The expected number of rounds per step is sum_{r>=0} P(K_r < B) (K_0 = 0).
- A trainer that replaces each filtered prompt with a fresh one until B pass (OpenRLHF)
  consumes N prompts, N - B ~ NegativeBinomial(B, p): B/p on average; it never stalls
  but can run through the data set.

The recommended generation batch is the smallest g for which one round fills the batch
with probability `ONE_ROUND_TARGET`; the recommended maximum is the smallest M whose
stall risk is at most `STALL_TARGET`, at the measured p.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from curate.errors import UsageError

# One round should fill the batch this often (the rest take a second round).
ONE_ROUND_TARGET = 0.9
# The stall risk the recommended maximum number of rounds stays under.
STALL_TARGET = 1e-4
# Recommended maxima never go below this: p drifts during training (it falls as prompts
# become always right), and a second round is cheap insurance.
MIN_MAX_ROUNDS = 2
MAX_ROUNDS_SEARCHED = 1000
# The stall risk is also shown for a share this many times smaller than measured.
DRIFT_FACTOR = 0.5


def binomial_below(n: int, p: float, k: int) -> float:
    """P(Binomial(n, p) < k), summed in log space (exact; n into the millions)."""
    if k <= 0:
        return 0.0
    if k > n:
        return 1.0
    if p <= 0.0:
        return 1.0
    if p >= 1.0:
        return 0.0
    log_p, log_q = math.log(p), math.log1p(-p)
    base = math.lgamma(n + 1)
    terms = [
        base - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * log_p + (n - i) * log_q
        for i in range(k)
    ]
    top = max(terms)
    total = math.exp(top) * math.fsum(math.exp(t - top) for t in terms)
    return min(1.0, total)


def stall_risk(p: float, gen_batch_size: int, train_batch_size: int, max_rounds: int) -> float:
    """P(fewer than B mixed groups after M rounds of g prompts)."""
    if max_rounds <= 0:  # no upper limit: the step never fails, it only runs long
        return 0.0
    return binomial_below(max_rounds * gen_batch_size, p, train_batch_size)


def expected_rounds(
    p: float, gen_batch_size: int, train_batch_size: int, max_rounds: int = 0
) -> float | None:
    """E[rounds per step], capped at `max_rounds` when positive; None when p is 0 and
    there is no cap (the step never fills)."""
    if p <= 0.0:
        return float(max_rounds) if max_rounds > 0 else None
    total, r = 0.0, 0
    limit = max_rounds if max_rounds > 0 else MAX_ROUNDS_SEARCHED
    while r < limit:
        term = binomial_below(r * gen_batch_size, p, train_batch_size)
        total += term
        if term < 1e-12:
            break
        r += 1
    return total


def prompts_quantile(p: float, train_batch_size: int, q: float) -> int | None:
    """The smallest n with P(at least B of n prompts mixed) >= q (replacement sampling)."""
    if p <= 0.0:
        return None
    lo, hi = train_batch_size, max(train_batch_size, math.ceil(train_batch_size / p))
    while binomial_below(hi, p, train_batch_size) > 1 - q:
        hi *= 2
    while lo < hi:
        mid = (lo + hi) // 2
        if binomial_below(mid, p, train_batch_size) <= 1 - q:
            hi = mid
        else:
            lo = mid + 1
    return lo


@dataclass(frozen=True, slots=True)
class TrainerKnobs:
    """How one trainer names the dynamic-sampling settings, and where that is defined."""

    name: str
    title: str
    source: str
    bounded: bool  # stops after a maximum number of rounds (else replaces prompts)

    def lines(
        self, group_size: int, train_batch: int, gen_batch: int, max_rounds: int
    ) -> list[str]:
        raise NotImplementedError


class _Verl(TrainerKnobs):
    def lines(
        self, group_size: int, train_batch: int, gen_batch: int, max_rounds: int
    ) -> list[str]:
        return [
            f"data.train_batch_size={train_batch}",
            f"data.gen_batch_size={gen_batch}",
            f"actor_rollout_ref.rollout.n={group_size}",
            "algorithm.filter_groups.enable=True",
            "algorithm.filter_groups.metric=acc",
            f"algorithm.filter_groups.max_num_gen_batches={max_rounds}",
        ]


class _NemoRL(TrainerKnobs):
    def lines(
        self, group_size: int, train_batch: int, gen_batch: int, max_rounds: int
    ) -> list[str]:
        multiplier = gen_batch / train_batch
        return [
            f"grpo.num_prompts_per_step={train_batch}",
            f"grpo.num_generations_per_prompt={group_size}",
            "grpo.use_dynamic_sampling=true",
            f"grpo.batch_multiplier={multiplier:.4g}",
            f"grpo.dynamic_sampling_max_gen_batches={max_rounds}",
        ]


class _OpenRLHF(TrainerKnobs):
    def lines(
        self, group_size: int, train_batch: int, gen_batch: int, max_rounds: int
    ) -> list[str]:
        return [
            f"--rollout.batch_size {train_batch}",
            f"--rollout.n_samples_per_prompt {group_size}",
            "--algo.dynamic_filtering_enable",
            "--algo.dynamic_filtering_range 0 1",
        ]


TRAINERS: dict[str, TrainerKnobs] = {
    "verl": _Verl(
        "verl",
        "verl (DAPO recipe)",
        "verl docs/algo/dapo.md; verl/trainer/ppo/ray_trainer.py",
        bounded=True,
    ),
    "nemo-rl": _NemoRL(
        "nemo-rl",
        "NeMo-RL (GRPO with dynamic sampling)",
        "NeMo-RL docs/guides/dapo.md; nemo_rl/algorithms/grpo.py",
        bounded=True,
    ),
    "openrlhf": _OpenRLHF(
        "openrlhf",
        "OpenRLHF (dynamic filtering)",
        "OpenRLHF openrlhf/trainer/ppo_utils/samples_generator.py",
        bounded=False,
    ),
}
TRAINER_NAMES = tuple(TRAINERS)


@dataclass
class DynamicSamplingPlan:
    """What `curate report --trainer T --train-batch-size B` prints (JSON key
    `trainer_settings`)."""

    trainer: str
    title: str
    source: str
    group_size: int
    train_batch_size: int
    mixed_share: float
    gen_batch_size: int | None
    max_gen_batches: int | None
    expected_rounds: float | None
    stall_risk: float | None
    stall_risk_if_halved: float | None
    expected_prompts_per_step: float | None
    prompts_per_step_p99: int | None
    settings: list[str] = field(default_factory=list)
    chosen: str = "recommended"  # or "given": the user's own gen batch / maximum checked
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def check_settings(
    trainer: str,
    train_batch_size: int,
    gen_batch_size: int | None = None,
    max_gen_batches: int | None = None,
) -> None:
    """UsageError (one line, naming the option) for settings that cannot be planned."""
    if train_batch_size < 1:
        raise UsageError("--train-batch-size must be at least 1")
    if gen_batch_size is not None and gen_batch_size < train_batch_size:
        raise UsageError(
            f"--gen-batch-size {gen_batch_size} is below --train-batch-size {train_batch_size}: "
            "a round could never fill a batch"
        )
    if max_gen_batches is not None and max_gen_batches < 0:
        raise UsageError("--max-gen-batches must be 0 (no limit) or more")
    if trainer not in TRAINERS:
        raise UsageError(f"--trainer {trainer}: unknown; choose from {', '.join(TRAINERS)}")
    given = gen_batch_size is not None or max_gen_batches is not None
    if given and not TRAINERS[trainer].bounded:
        raise UsageError(
            f"--trainer {trainer} replaces filtered prompts one by one: it has no generation "
            "batch or maximum to check"
        )


def plan_dynamic_sampling(
    mixed_share: float,
    *,
    trainer: str,
    train_batch_size: int,
    group_size: int,
    gen_batch_size: int | None = None,
    max_gen_batches: int | None = None,
) -> DynamicSamplingPlan:
    """The dynamic-sampling settings for `trainer` at mixed share p (module docstring).

    Given `gen_batch_size` / `max_gen_batches` are checked rather than recommended."""
    check_settings(trainer, train_batch_size, gen_batch_size, max_gen_batches)
    knobs = TRAINERS[trainer]
    p = min(1.0, max(0.0, float(mixed_share)))
    b = train_batch_size
    given = gen_batch_size is not None or max_gen_batches is not None
    plan = DynamicSamplingPlan(
        trainer=knobs.name,
        title=knobs.title,
        source=knobs.source,
        group_size=group_size,
        train_batch_size=b,
        mixed_share=p,
        gen_batch_size=None,
        max_gen_batches=None,
        expected_rounds=None,
        stall_risk=None,
        stall_risk_if_halved=None,
        expected_prompts_per_step=b / p if p > 0 else None,
        prompts_per_step_p99=prompts_quantile(p, b, 0.99),
        chosen="given" if given else "recommended",
    )
    if p <= 0.0:
        plan.note = (
            f"no group of {group_size} is expected to be mixed: dynamic sampling would never "
            "fill a batch; filter the data set or raise the group size first"
        )
        return plan
    if not knobs.bounded:
        plan.settings = knobs.lines(group_size, b, b, 0)
        return plan
    gen = gen_batch_size if gen_batch_size is not None else one_round_batch(p, b)
    rounds = max_gen_batches if max_gen_batches is not None else safe_max_rounds(p, gen, b)
    plan.gen_batch_size = gen
    plan.max_gen_batches = rounds
    plan.expected_rounds = expected_rounds(p, gen, b, rounds)
    plan.stall_risk = stall_risk(p, gen, b, rounds)
    plan.stall_risk_if_halved = stall_risk(p * DRIFT_FACTOR, gen, b, rounds)
    plan.settings = knobs.lines(group_size, b, gen, rounds)
    return plan


def one_round_batch(p: float, train_batch_size: int) -> int:
    """The smallest g with P(Binomial(g, p) >= B) >= ONE_ROUND_TARGET."""
    q = ONE_ROUND_TARGET
    return prompts_quantile(p, train_batch_size, q) or train_batch_size


def safe_max_rounds(p: float, gen_batch_size: int, train_batch_size: int) -> int:
    """The smallest M (at least MIN_MAX_ROUNDS) whose stall risk is at most STALL_TARGET."""
    for m in range(MIN_MAX_ROUNDS, MAX_ROUNDS_SEARCHED + 1):
        if stall_risk(p, gen_batch_size, train_batch_size, m) <= STALL_TARGET:
            return m
    return MAX_ROUNDS_SEARCHED


def plan_lines(plan: DynamicSamplingPlan) -> tuple[str, list[str]]:
    """A headline and detail lines, shared by the table and the Markdown report."""
    p, b, g = plan.mixed_share, plan.train_batch_size, plan.group_size
    head = f"{plan.title}, {b} prompts per step, groups of {g}"
    lines = [f"mixed groups at G={g}: {p:.1%} (the share dynamic sampling keeps)"]
    if plan.note:
        return head, [*lines, plan.note]
    if plan.gen_batch_size is not None and plan.max_gen_batches is not None:
        word = "checked" if plan.chosen == "given" else "recommended"
        rounds = plan.expected_rounds or 0.0
        lines.append(
            f"{word}: generate {plan.gen_batch_size} prompts per round, at most "
            f"{plan.max_gen_batches} rounds; expected {rounds:.2f} rounds per step"
        )
        lines.append(
            "stall risk: none (no maximum)"
            if plan.max_gen_batches == 0
            else f"stall risk (a step hits the maximum): {_risk(plan.stall_risk)}; "
            f"{_risk(plan.stall_risk_if_halved)} if the mixed share halves in training"
        )
    elif plan.expected_prompts_per_step is not None:
        lines.append(
            f"each step consumes {plan.expected_prompts_per_step:.0f} prompts on average "
            f"(99% of steps at most {plan.prompts_per_step_p99}): {1 / p:.1f}x as many as "
            "without filtering; it never stalls"
        )
    return head, lines


def _risk(value: float | None) -> str:
    if value is None:
        return "n/a"
    if value < 1e-6:
        return "<1e-6"
    return f"{value:.2g}" if value < 0.01 else f"{value:.1%}"
