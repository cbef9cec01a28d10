"""What a grpo run checks and builds before step 1: the pool's playability, the judge with its
own key, the endpoints' preflight, and the seeds."""

from __future__ import annotations

import os
import random
from typing import Any

from endstate.core.console.progress import note
from endstate.core.episode.plan import refuse, refuse_unplayable
from endstate.core.episode.preflight import check_endpoints
from endstate.core.grading.grader import Grader
from endstate.core.grading.judge import Judge
from endstate.grpo.config import TrainConfig, role_keys
from endstate.grpo.rollouts import run_config


def judge_of(cfg: TrainConfig) -> Judge | None:
    """The judge --judge-model and --judge-base-url name, with the run's timeout, retries and
    its own API key (core.wire.keys)."""
    judge = Judge.from_options(cfg.judge_model, cfg.judge_base_url, cfg.judge_cache,
                               api_key=role_keys(cfg)[0].get("judge"),
                               timeout_s=run_config(cfg, 0).timeout, retries=cfg.retries)
    if judge is not None:
        judge.key_env = cfg.judge_key_env  # named in the preflight's words about a refused key
    return judge


def runnable_pool(tasks: list[dict[str, Any]], grader: Grader, user: str) -> None:
    """Refuse before step 1 (exit 2, naming the tasks and the flag) what cannot train: a task the
    simulated user cannot play, or one this grader cannot grade (a judge check without a judge)."""
    refuse_unplayable(tasks, user)
    for problem in sorted({p for p in map(grader.task_problem, tasks) if p}):
        refuse([t["id"] for t in tasks if grader.task_problem(t) == problem], problem,
               "(YAML: judge_model, judge_base_url); its episodes would be system errors and "
               "never train")


def check_run_endpoints(cfg: TrainConfig, judge: Judge | None, quiet: bool) -> None:
    """The keys' warnings, then the preflight of the user's and the judge's endpoints, before a
    rank, a model or an engine starts (each rank asks; rank 0 speaks)."""
    first = os.environ.get("RANK", "0") == "0"
    for warning in role_keys(cfg)[1].values() if first else ():
        note(f"grpo: warning: {warning}")
    check_endpoints(run_config(cfg, 0), judge, quiet=quiet or not first, enabled=cfg.preflight)


def seed_everything(seed: int) -> None:
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed % 2 ** 32)
    torch.manual_seed(seed)
