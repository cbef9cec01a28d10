"""vLLM colocated in the training process (GPU): sampling for the lockstep rollouts, and the
updated weights pushed in place after every optimizer step.

Each torchrun rank runs its own vLLM engine (tensor parallel 1, `external_launcher` when there are
several ranks) on its own GPU, next to its DeepSpeed shard, sized by `gpu_memory_utilization`.
Log-probs are vLLM's raw ones (before temperature and top-p), like LocalGenerator's.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from endstate.core.errors import EndstateError
from endstate.core.local_model import Generation

# Attribute paths to the torch model inside an in-process vLLM engine, newest layout first.
_MODEL_PATHS = ("model_executor.driver_worker.worker.model_runner.model",
                "model_executor.driver_worker.model_runner.model")


class VLLMGenerator:
    def __init__(self, model_dir: Path, max_model_len: int, gpu_memory_utilization: float, seed: int):
        # The engine core must live in this process, or its weights cannot be replaced in place.
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        try:
            from vllm import LLM
        except ImportError:
            raise EndstateError("--rollout-engine vllm needs vllm: pip install 'endstate[serve]'") from None
        from transformers import AutoTokenizer

        kwargs = {"model": str(model_dir), "dtype": "bfloat16", "max_model_len": max_model_len,
                  "seed": seed, "gpu_memory_utilization": gpu_memory_utilization,
                  "enable_prefix_caching": True}
        import torch.distributed as dist

        if dist.is_initialized():  # as TRL's colocate mode: join the trainer's process group
            kwargs["distributed_executor_backend"] = "external_launcher"
        self.llm = LLM(**kwargs)
        self.eos_id = AutoTokenizer.from_pretrained(model_dir).eos_token_id
        self.requests = 0  # per-request seeds continue across calls

    def sampler(self, max_new_tokens: int, temperature: float, top_p: float,
                seed: int) -> Callable[[list[list[int]], list[int]], list[Generation]]:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        def generate(prompts: list[list[int]], prefix_lens: list[int] | None = None) -> list[Generation]:
            """vLLM caches shared prefixes itself (enable_prefix_caching): prefix_lens is unused."""
            params = [SamplingParams(max_tokens=max_new_tokens, temperature=temperature, top_p=top_p,
                                     seed=(seed + self.requests + i) % 2 ** 31, logprobs=0)
                      for i in range(len(prompts))]
            self.requests += len(prompts)
            outputs = self.llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts], params,
                                        use_tqdm=False)
            results = []
            for out in outputs:
                c = out.outputs[0]
                ids = list(c.token_ids)
                logprobs = [step[t].logprob for step, t in zip(c.logprobs, ids)] if c.logprobs else None
                results.append(Generation(ids, logprobs, finished=bool(ids) and ids[-1] == self.eos_id))
            return results

        return generate

    def push(self, weights: Iterable[tuple[str, Any]]) -> None:
        """Load the trainer's current weights into the engine and drop KV computed with old ones."""
        engine = self.llm.llm_engine
        for path in _MODEL_PATHS:
            try:
                model = functools.reduce(getattr, path.split("."), engine)
            except AttributeError:
                continue
            model.load_weights(weights)
            break
        else:
            batch = list(weights)
            self.llm.collective_rpc(lambda worker, b=batch: worker.model_runner.model.load_weights(b))
        self.llm.reset_prefix_cache()
