"""grpo's configuration: one dataclass, defaults ← optional YAML file ← command-line flags.
No exec, no globals: the resolved config is a plain value, printed by --dry-run and saved with
every run (`config.json` in the output folder)."""

from __future__ import annotations

import dataclasses
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from endstate.core.cli.options import FLAG_TYPES
from endstate.core.cli.ranges import (
    KEY_ENV,
    REPEATS,
    RETRIES,
    SECONDS,
    SEED,
    URL,
    EndpointURL,
    KeyEnv,
    count,
    number,
)
from endstate.core.episode.settings import EpisodeSettings
from endstate.core.errors import EndstateError
from endstate.core.stats.bands import DEFAULT_NAMES
from endstate.core.wire.keys import ROLE_KEYS, Role, resolve_keys
from endstate.grpo.algorithm import LOSS_AGGREGATIONS
from endstate.grpo.correction import IS_LEVELS

ROLLOUT_ENGINES = ("local", "vllm")
REPORT_TO = ("tensorboard", "wandb")
# The declared range of every number of grpo's own (the episode settings' are core.cli.options
# FLAG_TYPES): the flags' click types, and what a YAML value is checked against. A key added here
# without a range would be a plain INT or FLOAT flag: tests/test_flag_ranges.py names it.
RANGES: dict[str, click.ParamType] = {
    "steps": count(1, 10**6), "batch_tasks": count(1, 10**5), "group_size": count(1, 10**4),
    "adv_eps": number(0, 1), "clip_low": number(0, 1), "clip_high": number(0, 10),
    "kl_coef": number(0, 100), "rollout_is_cap": number(1, 1e6), "dual_clip": number(0, 1e6),
    "log_ratio_clamp": number(0, 80, min_open=True),  # exp(88) overflows fp32
    "max_rounds": count(1, 1000), "max_regenerations": count(0, 1000), "max_error_steps": count(1, 10**6),
    "lr": number(0, 1, min_open=True), "weight_decay": number(0, 10), "grad_clip": number(0, 1e6),
    "micro_batch": count(1, 2**16), "logits_chunk": count(1, 2**24),
    "vllm_gpu_memory": number(0, 1, min_open=True), "vllm_max_batched_tokens": count(1, 2**24),
    "vllm_tensor_parallel": count(1, 1024),
    "seed": SEED, "save_freq": count(1, 10**6), "rest_steps": count(1, 10**6), "nodes": count(1, 10**5),
    "gpus_per_node": count(1, 1024), "gpu_memory": number(0, 1e6, min_open=True),
    "host_memory": number(0, 1e6, min_open=True),
    "eval_every": count(0, 10**6), "eval_repeats": REPEATS, "timeout": SECONDS, "retries": RETRIES,
    # not numbers, checked the same way when read from a flag or the YAML file
    "user_url": URL, "judge_base_url": URL, "user_key_env": KEY_ENV, "judge_key_env": KEY_ENV,
}
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


@dataclass
class TrainConfig(EpisodeSettings):
    """Every grpo setting; the episode settings (temperature ... device) are rollout's own
    (core.settings), so training samples exactly as rollout and probe do."""

    # data and model
    pool: str = ""  # task JSONL (bucket --tasks output, or any task file)
    model: str = "embedded"  # a local HF folder, or `embedded` (SmolLM2-135M-Instruct)
    out: str = "runs/grpo"
    domains: list[str] = field(default_factory=list)
    skip_invalid: bool = False  # train on the pool's valid tasks, listing the invalid lines
    allow_bench: bool = False  # a pool with tasks of a held-out split (bench, ood) is refused
    # the algorithm
    steps: int = 50
    batch_tasks: int = 18  # B: informative groups per step
    group_size: int = 8  # G: rollouts per task
    std_norm: bool = True  # advantage /= (group std + eps)
    adv_eps: float = 1e-6
    clip_low: float = 0.2
    clip_high: float = 0.2
    loss_agg: str = "token-mean"
    kl_coef: float = 0.0  # > 0 loads a frozen reference model
    # off-policy safety (correction.py): rollout/trainer importance weights, ratio bounds
    rollout_is: str = "auto"  # auto (token for vllm, off for local) | off | token | sequence
    rollout_is_cap: float = 2.0  # C: weights truncated at C (TRL's TIS cap, verl's threshold)
    dual_clip: float = 3.0  # c: loss of an A < 0 token capped at c·|A| (0: off)
    log_ratio_clamp: float = 20.0  # every log-ratio clamped to ±this before exp
    max_rounds: int = 4  # generation rounds per step (zero-variance refills, re-generations)
    max_regenerations: int = 2  # per task and step, after a system error
    max_error_steps: int = 2  # steps in a row whose every episode is a system error: then stop
    # optimization
    lr: float = 1e-6
    weight_decay: float = 0.0
    grad_clip: float = 1.0
    micro_batch: int = 4  # sequences per forward/backward
    deepspeed: str = "zero2"  # configs/deepspeed/NAME.json or a path
    logits_chunk: int = 1024  # positions per lm_head chunk of the log-probs (grpo/logprobs.py)
    activation_checkpointing: bool = False  # recompute each decoder layer in the backward
    # rollouts
    rollout_engine: str = "local"
    jobs: int = 64  # episodes in flight per rank: prompts per generate() call
    vllm_gpu_memory: float = 0.35  # fraction of GPU memory vLLM may take when colocated
    vllm_tensor_parallel: int = 1  # GPUs (consecutive ranks of a node) one colocated engine spans
    vllm_max_batched_tokens: int = 4096  # vLLM's max_num_batched_tokens (TRL's colocate value)
    # the simulated user and the judge: rollout's and probe's flags, same names and meanings
    user: str = "scripted"  # scripted (the task's script) | llm (a served chat model)
    user_url: list[str] = field(default_factory=list)  # --user llm: OpenAI-compatible base URLs
    user_model: str | None = None
    user_seed: bool = True  # send the episode's seed with each user request (reproducible answers)
    judge_model: str | None = None  # judge checks: the model answering YES/NO
    judge_base_url: str | None = None
    judge_cache: str | None = None  # SQLite file of cached verdicts
    # the variables holding the user's and the judge's API keys (core.wire.keys): names, never keys
    user_key_env: str = ROLE_KEYS["user"]
    judge_key_env: str = ROLE_KEYS["judge"]
    timeout: float | None = None  # seconds per call of the user's and the judge's models
    retries: int = 4  # calls per request in all, with backoff, before a system error
    preflight: bool = True  # the user's and the judge's endpoints answer before anything loads
    # a held-out evaluation during the run (grpo/evaluation.py)
    eval_tasks: str | None = None  # task JSONL, never trained on
    eval_every: int = 0  # steps between evaluations (step 0 and the last step always); 0: those two
    eval_repeats: int = 4  # attempts per eval task
    # dashboards (grpo/dashboards.py): tensorboard (OUT/tb), wandb (offline without a network), none
    report_to: list[str] = field(default_factory=lambda: ["tensorboard"])
    # bookkeeping
    seed: int = 0
    save_freq: int = 5
    resume: bool = False
    plot: str | None = None
    save_episodes: bool = False  # OUT/episodes.jsonl: every training rollout graded (grade audit)
    retire: bool = False
    keep: list[str] = field(default_factory=lambda: ["hard", "medium", "easy"])
    base_attempts: list[str] = field(default_factory=list)  # probe attempts for --retire
    rebucket: bool = False  # retire the too easy, rest the too hard (grpo/retire.py)
    rest_steps: int = 4  # --rebucket: steps a too-hard task rests before it is drawn again
    # launch topology (for --dry-run's command and the divisibility check)
    nodes: int = 1
    gpus_per_node: int = 1
    # the memory plan of --dry-run (grpo/memory_plan.py)
    model_config: str | None = None  # plan for this config.json (configs/models/NAME or a path)
    gpu_memory: float | None = None  # GB per GPU: refuse a plan that does not fit
    host_memory: float | None = None  # GB of host memory per node: likewise

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
        self._check_ranges()
        if self.plot is not None and not self.plot.lower().endswith(".png"):
            raise EndstateError(f"plot {self.plot!r}: give a file name ending in .png")
        unknown = [band for band in self.keep if band not in DEFAULT_NAMES]
        if unknown:
            raise EndstateError(f"keep: no band named {', '.join(unknown)}; bands: "
                                f"{','.join(DEFAULT_NAMES)}")
        if not self.pool:
            raise EndstateError("give --pool POOL.jsonl (bucket --tasks output or a task file)")
        if self.loss_agg not in LOSS_AGGREGATIONS:
            raise EndstateError(f"loss_agg {self.loss_agg!r}: choose one of {', '.join(LOSS_AGGREGATIONS)}")
        if self.rollout_engine not in ROLLOUT_ENGINES:
            raise EndstateError(f"rollout_engine {self.rollout_engine!r}: choose local or vllm")
        if self.rollout_is not in ("auto", *IS_LEVELS):
            raise EndstateError(f"rollout_is {self.rollout_is!r}: choose auto, {', '.join(IS_LEVELS)}")
        if self.dual_clip and self.dual_clip <= 1:
            raise EndstateError(f"dual_clip {self.dual_clip}: use a bound above 1 (3 as verl), or 0 for off")
        self._validate_user_judge_eval()
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

    def _check_ranges(self) -> None:
        """A YAML value skips click: each is held to its flag's range (or URL check) here."""
        for name, kind in {**FLAG_TYPES, **RANGES}.items():
            value = getattr(self, name)
            if value is None or not isinstance(kind, (click.IntRange, click.FloatRange, EndpointURL, KeyEnv)):
                continue
            for one in value if isinstance(value, list) else [value]:
                try:
                    kind.convert(one, None, None)
                except click.BadParameter as e:
                    raise EndstateError(f"{name}: {e.message}") from None

    def _validate_user_judge_eval(self) -> None:
        if self.user not in ("scripted", "llm"):
            raise EndstateError(f"user {self.user!r}: choose scripted or llm")
        if self.user == "llm" and not (self.user_url and self.user_model):
            raise EndstateError("--user llm needs --user-url and --user-model (YAML: user_url, user_model)")
        if bool(self.judge_model) != bool(self.judge_base_url):
            raise EndstateError("a judge needs both --judge-model and --judge-base-url")
        unknown = sorted(set(self.report_to) - {*REPORT_TO, "none"})
        if unknown:
            raise EndstateError(f"report_to {unknown}: choose from {', '.join(REPORT_TO)} or none")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


FIELDS = {f.name: f for f in dataclasses.fields(TrainConfig)}


def load_yaml(path: str | None) -> dict[str, Any]:
    if not path:
        return {}
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_bytes().decode()) or {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise EndstateError(f"{path}: cannot read the config: {e}") from None
    except RecursionError:
        raise EndstateError(f"{path}: cannot read the config: nested too deep") from None
    if not isinstance(data, dict):
        raise EndstateError(f"{path}: a grpo config is a mapping of keys to values")
    unknown = sorted(set(data) - set(FIELDS))
    if unknown:
        raise EndstateError(f"{path}: unknown key(s) {', '.join(unknown)}; known: {', '.join(FIELDS)}")
    for key, value in data.items():
        check_type(key, value, f"{path}: ")
    return data


# What a YAML value of each field type may be (bool is an int in Python: never a number here).
_KINDS = {"int": ("an integer", lambda v: isinstance(v, int) and not isinstance(v, bool)),
          "float": ("a number", lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)),
          "str": ("a string", lambda v: isinstance(v, str)),
          "bool": ("true or false", lambda v: isinstance(v, bool)),
          "dict": ("a mapping", lambda v: isinstance(v, dict)),
          "list[str]": ("a list of strings (or one comma-separated string)",
                        lambda v: isinstance(v, str) or isinstance(v, list) and all(isinstance(x, str) for x in v))}


def check_type(key: str, value: Any, where: str = "") -> None:
    """A usage error naming the key and the expected type when `value` does not fit the field."""
    kind = FIELDS[key].type
    optional = kind.endswith(" | None")
    if optional and value is None:
        return
    expected, fits = _KINDS[kind.removesuffix(" | None")]
    if not fits(value):
        expected += " or null" if optional else ""
        raise EndstateError(f"{where}{key}: expected {expected}, got {value!r}")


# A flag that does nothing without another: given on the command line without it, it is refused,
# naming the other (a YAML file is a set of defaults for many runs: its keys are not checked).
_JUDGE = "a judge (--judge-model and --judge-base-url)"
IDLE_WITHOUT: dict[str, tuple[Callable[[TrainConfig], Any], str]] = {
    "eval_every": (lambda c: c.eval_tasks, "--eval-tasks"),
    "eval_repeats": (lambda c: c.eval_tasks, "--eval-tasks"),
    "rest_steps": (lambda c: c.rebucket, "--rebucket"),
    "keep": (lambda c: c.retire or c.rebucket, "--retire or --rebucket"),
    "base_attempts": (lambda c: c.retire or c.rebucket, "--retire or --rebucket"),
    "user_url": (lambda c: c.user == "llm", "--user llm"),
    "user_model": (lambda c: c.user == "llm", "--user llm"),
    "user_seed": (lambda c: c.user == "llm", "--user llm"),
    "user_key_env": (lambda c: c.user == "llm", "--user llm"),
    "judge_cache": (lambda c: c.judge_model, _JUDGE),
    "judge_key_env": (lambda c: c.judge_model, _JUDGE),
    "timeout": (lambda c: c.user == "llm" or c.judge_model, f"--user llm or {_JUDGE}"),
    "retries": (lambda c: c.user == "llm" or c.judge_model, f"--user llm or {_JUDGE}"),
    "vllm_gpu_memory": (lambda c: c.rollout_engine == "vllm", "--rollout-engine vllm"),
    "vllm_max_batched_tokens": (lambda c: c.rollout_engine == "vllm", "--rollout-engine vllm"),
    "vllm_tensor_parallel": (lambda c: c.rollout_engine == "vllm", "--rollout-engine vllm"),
    "rollout_is_cap": (lambda c: c.rollout_is_level != "off",
                       "importance weights: --rollout-is token|sequence (auto: on with --rollout-engine vllm)"),
}


def refuse_idle_flags(cfg: TrainConfig, given: set[str]) -> None:
    for key, (needed, other) in IDLE_WITHOUT.items():
        if key in given and key in FIELDS and not needed(cfg):
            flag = "--" + key.replace("_", "-")
            flag += f"/--no-{flag[2:]}" if FIELDS[key].type == "bool" else ""
            raise EndstateError(f"{flag} has no effect without {other}: add it, or drop {flag}")


def resolve(yaml_path: str | None, flags: dict[str, Any]) -> TrainConfig:
    """Defaults, then the YAML file, then the flags the user actually gave (None = not given)."""
    values = {**load_yaml(yaml_path), **{k: v for k, v in flags.items() if v is not None}}
    if isinstance(values.get("stop"), (str, tuple)):  # one stop string, or --stop repeated
        values["stop"] = [values["stop"]] if isinstance(values["stop"], str) else list(values["stop"])
    for k in ("domains", "keep", "base_attempts", "user_url", "report_to"):
        if isinstance(values.get(k), (str, tuple)):
            v = values[k]
            values[k] = [x for x in (v.split(",") if isinstance(v, str) else v) if x]
    if values.get("keep"):  # --keep hard,medium and --keep hard --keep medium alike
        values["keep"] = [band for v in values["keep"] for band in v.split(",") if band]
    cfg = TrainConfig(**values)
    cfg.validate()
    refuse_idle_flags(cfg, {k for k, v in flags.items() if v is not None})
    return cfg


def role_keys(cfg: TrainConfig) -> tuple[dict[str, str | None], dict[str, str]]:
    """The user's and the judge's API keys, and why one gets none (core.wire.keys)."""
    judged = [cfg.judge_base_url] if cfg.judge_model and cfg.judge_base_url else []
    return resolve_keys([Role("user", cfg.user_url if cfg.user == "llm" else [], cfg.user_key_env),
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
