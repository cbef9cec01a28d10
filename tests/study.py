"""A seeded two-policy study for the evalstats tests: a base and a trained policy on 4 domains
× 5 tasks × 8 attempts, with token usage and costs, and graded episodes whose checks fail."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import orjson

EXAMPLES = Path(__file__).resolve().parent.parent / "schemas" / "examples"
DOMAINS = ("bank", "retail", "support", "travel")
BASE, TRAINED = "SmolLM2-135M-Instruct", "out/demo/grpo/checkpoints/step-50/hf"
PROMPTING = {"few_shot": True, "tool_prefill": True, "tool_format": "signatures",
             "interpreter": "1"}
CHECKS = ("row-updated", "one-refund", "no-side-effects", "told-user")


def study(seed: int = 0, tasks_per_domain: int = 5, repeats: int = 8):
    """(base attempts, trained attempts, graded episodes of both): trained is better on two
    domains, equal on one and worse on one; its episodes are shorter (cheaper)."""
    rng = np.random.default_rng(seed)
    lift = {"bank": 0.25, "retail": 0.15, "support": 0.0, "travel": -0.1}
    runs = {BASE: [], TRAINED: []}
    graded = []
    template = orjson.loads((EXAMPLES / "graded_episode.json").read_bytes())
    for d in DOMAINS:
        for t in range(tasks_per_domain):
            task_id = f"{d}-task-{t}"
            p_base = float(rng.beta(1.6, 1))
            for model, p, tokens in ((BASE, p_base, 5000), (TRAINED, min(max(p_base + lift[d], 0.0), 1.0), 3500)):
                for a in range(repeats):
                    reward = int(rng.random() < p)
                    prompt = int(tokens * (0.8 + 0.4 * rng.random()))
                    usage = {"agent": {"prompt_tokens": prompt, "completion_tokens": 200}}
                    cost = round((prompt * 1.0 + 200 * 4.0) / 1e6, 8)
                    runs[model].append({
                        "task_id": task_id, "domain": d, "attempt": a, "reward": reward,
                        "status": "ok", "model": model, "usage": usage, "cost_usd": cost,
                        "episode_id": f"{task_id}/{a}/{model[-5:]}", "prompting": PROMPTING})
                    episode = copy.deepcopy(template)
                    episode.update(task_id=task_id, domain=d, attempt=a, reward=reward,
                                   episode_id=f"{task_id}/{a}/{model[-5:]}",
                                   policy={"model": model, "backend": "local", **PROMPTING})
                    failing = set() if reward else {CHECKS[int(rng.integers(0, 2 + t % 3))]}
                    episode["checks"] = [{"id": c, "kind": "row", "passed": c not in failing,
                                          "detail": "-"} for c in CHECKS]
                    graded.append(episode)
    return runs[BASE], runs[TRAINED], graded


def write(path: Path, records) -> str:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    return str(path)
