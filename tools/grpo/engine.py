"""The DeepSpeed side: the engine, one GRPO update, checkpoints, HF export (the process group:
grpo.distributed).

One code path from a laptop to a cluster: on CPU it runs with DS_ACCELERATOR=cpu, the gloo
backend and fp32; on GPU with NCCL and bf16. The optimizer is torch's fused AdamW handed to
DeepSpeed, so no DeepSpeed op is compiled (ZeRO-Offload configs opt into DeepSpeed's CPUAdam
instead; grpo.distributed keeps DeepSpeed's CPU comm op from being built).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from endstate import CONFIGS_DIR
from endstate.core.agent.local_model import drop_gguf_quantization, loading_bars_only_on_a_terminal
from endstate.core.errors import EndstateError
from endstate.grpo.batch import Batch, Sample, collate, micro_batches
from endstate.grpo.logprobs import (
    DEFAULT_CHUNK,
    check_plain_head,
    forward,
    head_logprobs,
    shared_prefix,
)
from endstate.grpo.objective import MAXIMA, SUMS, LossConfig, accumulate, micro_batch_loss

CONFIG_DIR = CONFIGS_DIR / "deepspeed"
HF_DIR = "hf"  # inside a checkpoint folder: the plain HF weights + tokenizer


def resolve_ds_config(name_or_path: str) -> Path:
    """`zero2` means configs/deepspeed/zero2.json; anything else is a path to a JSON file."""
    path = Path(name_or_path)
    if not path.suffix:
        path = CONFIG_DIR / f"{name_or_path}.json"
    known = ", ".join(sorted(p.stem for p in CONFIG_DIR.glob("*.json")))
    if not path.is_file():
        raise EndstateError(f"DeepSpeed config {name_or_path!r} not found; use one of {known} "
                            "or a path to a JSON file")
    try:
        if not isinstance(json.loads(path.read_bytes()), dict):
            raise ValueError("not a JSON object")
    except (OSError, ValueError, RecursionError) as e:
        raise EndstateError(f"DeepSpeed config {path}: not a JSON object ({e}); use one of {known} "
                            "or a path to a JSON file") from None
    return path


def ds_config(path: Path, *, micro_batch: int, grad_accum: int, world: int, bf16: bool,
              grad_clip: float) -> dict[str, Any]:
    """The JSON config with this run's batch geometry, precision and clipping filled in."""
    config = json.loads(path.read_text())
    config.update(train_micro_batch_size_per_gpu=micro_batch, gradient_accumulation_steps=grad_accum,
                  train_batch_size=micro_batch * grad_accum * world, gradient_clipping=grad_clip,
                  steps_per_print=10 ** 9, wall_clock_breakdown=False)
    config["bf16"] = {"enabled": bf16}
    config.pop("fp16", None)
    return config


def uses_ds_optimizer(config: dict[str, Any]) -> bool:
    """ZeRO-Offload of the optimizer needs DeepSpeed's own (compiled) CPUAdam."""
    offload = config.get("zero_optimization", {}).get("offload_optimizer", {})
    return offload.get("device", "none") not in ("none", None)


def plain_config(model_dir: Path):
    """The model's config without a GGUF `quantization_config`. The embedded model's folder has
    none (its conversion drops it); a folder converted from GGUF by other means may still name
    the quantization over dequantized safetensors, and transformers then refuses to train or save
    it ("purely quantized model")."""
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(model_dir)
    drop_gguf_quantization(config)
    return config


def load_model(model_dir: Path, dtype):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype, config=plain_config(model_dir))


def zero_stage(ds: dict[str, Any]) -> int:
    return int(ds.get("zero_optimization", {}).get("stage", 0))


@contextmanager
def partitioned_loading(ds: dict[str, Any]) -> Iterator[None]:
    """Under ZeRO-3, models loaded inside are built partitioned (transformers' DeepSpeed
    integration: deepspeed.zero.Init, then rank 0 reads the checkpoint and each layer is scattered
    as it loads), so no rank ever holds the whole model: 24 ranks × a 27B bf16 model would be 54 GB
    of host memory each. Scoped to the loading: while transformers sees a ZeRO-3 config it also
    makes generate() synchronise ranks, which the replica of the local engine must not."""
    if zero_stage(ds) != 3:
        yield
        return
    from transformers.integrations import HfDeepSpeedConfig
    from transformers.integrations.deepspeed import unset_hf_deepspeed_config

    alive = HfDeepSpeedConfig(ds)  # transformers keeps only a weak reference: hold it
    try:
        yield
    finally:
        unset_hf_deepspeed_config()
        del alive


def reference_ds_config(ds: dict[str, Any]) -> dict[str, Any]:
    """The frozen reference model's engine under ZeRO-3: partitioned like the policy (parameter
    offload included), no optimizer."""
    zero = {k: v for k, v in ds["zero_optimization"].items() if k != "offload_optimizer"}
    return {**{k: v for k, v in ds.items() if k != "optimizer"}, "zero_optimization": zero}


def enable_activation_checkpointing(model) -> None:
    """Recompute each decoder layer in the backward: activations shrink from every layer's
    intermediates to one tensor per layer (see memory_plan)."""
    kwargs = {"use_reentrant": False}
    if hasattr(model, "activation_checkpointing_enable"):  # its older name warns from transformers 5.2x
        model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)


class Policy:
    """The trained model inside a DeepSpeed engine, plus an optional frozen reference for KL.
    `logits_chunk`: positions per lm_head chunk of the log-probs (logprobs.py);
    `checkpointing`: activation checkpointing of the decoder layers."""

    def __init__(self, model_dir: Path, ds: dict[str, Any], lr: float, weight_decay: float,
                 device: str, reference: bool, seed: int, replica: bool = False,
                 logits_chunk: int = DEFAULT_CHUNK, checkpointing: bool = False):
        import deepspeed
        import torch
        from transformers import AutoTokenizer

        loading_bars_only_on_a_terminal()
        torch.manual_seed(seed)
        self.device, self.logits_chunk = device, logits_chunk
        # a micro-batch's common prefix once where every rank agrees (_prefixes); not under ZeRO-3
        # (every forward call all-gathers the layers) or activation checkpointing (the
        # checkpointed layers drop the cache)
        self.share_prefix = not checkpointing and zero_stage(ds) < 3
        self.tokenizer = AutoTokenizer.from_pretrained(model_dir)
        self.pad_id = (self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None
                       else self.tokenizer.eos_token_id)
        dtype = torch.bfloat16 if ds["bf16"]["enabled"] else torch.float32
        check_plain_head(plain_config(model_dir))  # before minutes of loading
        with partitioned_loading(ds):
            model = load_model(model_dir, dtype)
            ref = load_model(model_dir, dtype) if reference else None
        model.config.use_cache = False
        if checkpointing:
            enable_activation_checkpointing(model)
        params = [p for p in model.parameters() if p.requires_grad]
        if uses_ds_optimizer(ds):
            ds = {**ds, "optimizer": {"type": "AdamW", "params": {
                "lr": lr, "weight_decay": weight_decay, "betas": [0.9, 0.999], "eps": 1e-8}}}
            optimizer = None
        else:
            # fused: one kernel over every tensor, 0.08 s a step against the per-tensor loop's
            # 0.35-0.42 s for 135M parameters on 2 CPU cores (and TRL's default optimizer too)
            optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay, betas=(0.9, 0.999),
                                          eps=1e-8, fused=True)
        self.engine, *_ = deepspeed.initialize(model=model, model_parameters=params,
                                               optimizer=optimizer, config=ds)
        self.ref = None
        if ref is not None:
            ref.eval().requires_grad_(False)
            if zero_stage(ds) == 3:  # its forward gathers the partitioned layers, as the policy's
                ref, *_ = deepspeed.initialize(model=ref, config=reference_ds_config(ds))
            else:
                ref = ref.to(self.engine.device)
            self.ref = ref
        self.replica = None
        if replica and self.engine.zero_optimization_partition_weights():
            # a full copy by design, loaded outside partitioned_loading (see rollout_model)
            self.replica = load_model(model_dir, dtype).to(self.engine.device)
            self.replica.eval().requires_grad_(False)

    def rollout_model(self):
        """The model the local engine samples from. Under ZeRO-3 every rank holds a slice of each
        weight, and generating on the engine's module would all-gather every layer at every
        decoding step: ranks that generate different numbers of tokens or calls (or none) then
        wait on each other forever. So under ZeRO-3 each rank samples from a full replica, the
        same memory a colocated vLLM takes, refreshed collectively after each step
        (refresh_replica); otherwise from the trained module itself."""
        return self.replica if self.replica is not None else self.module

    def refresh_replica(self) -> None:
        """Copy the current weights into the replica, gathered one tensor at a time. Collective
        under ZeRO-3: every rank calls it at the same point (after the step, after a resume)."""
        if self.replica is None:
            return
        target = dict(self.replica.named_parameters())
        for name, tensor in self.named_weights():
            target[name].data.copy_(tensor)

    @property
    def module(self):
        return self.engine.module

    def _logprobs(self, model, batch: Batch, columns, temperature: float, top_k: int | None = None,
                  top_p: float = 1.0, prefix: int = 0):
        """log p and entropy of the targets at `columns` (positions with a completion token),
        under the distribution the sampler drew them from: logits / T, then top-k and top-p
        renormalised (core.local_model.processed_logits, as the local generator and vLLM's
        processed_logprobs), chunk by chunk through the lm_head (logprobs.py): the model's
        `logits` come back as (B, C, 2). `model`: the engine, or the reference (an engine under
        ZeRO-3); `prefix`: leading positions run once for every row (_prefixes)."""
        device = self.engine.device
        head = getattr(model, "module", model).get_output_embeddings()
        targets = batch.targets[:, columns].to(device)  # (B, C)
        out = forward(model, batch.input_ids.to(device), batch.attention_mask.to(device),
                      columns.to(device), lambda: head_logprobs(head, targets, self.logits_chunk,
                                                                temperature, top_k, top_p),
                      prefix)
        return out.logits[..., 0], out.logits[..., 1].detach()  # (B, C) each

    def _chunk_loss(self, batch: Batch, prefix: int, loss: LossConfig, norm: float):
        """(objective, statistics) of one micro-batch: objective.micro_batch_loss on this model."""
        import torch

        device = self.engine.device
        columns = batch.columns  # (C,)
        mask = batch.mask[:, columns].to(device)  # (B, C)
        processing = (loss.temperature, loss.top_k, loss.top_p)
        logp, entropy = self._logprobs(self.engine, batch, columns, *processing, prefix=prefix)  # (B, C)
        ref_logp = None
        if self.ref is not None and loss.kl_coef:
            with torch.no_grad():
                ref_logp, _ = self._logprobs(self.ref, batch, columns, *processing, prefix=prefix)
        objective, stats = micro_batch_loss(
            logp, batch.old_logprobs[:, columns].to(device), batch.advantages[:, columns].to(device),
            mask, loss, norm, ref_logp)
        stats["entropy"] = (entropy * mask).sum()
        return objective, stats

    def _filler_loss(self, loss: LossConfig):
        """A zero-gradient pass for a rank that ran out of samples (or whose micro-batch has no
        completion token): the collectives stay matched (under ZeRO-3 the reference's forward
        gathers too)."""
        import torch

        filler = Sample([self.pad_id] * 2, [False, True], [float("nan")] * 2, 0.0)
        batch = collate([filler], self.pad_id)
        logp, _ = self._logprobs(self.engine, batch, batch.columns, loss.temperature)
        if self.ref is not None and loss.kl_coef:
            with torch.no_grad():
                self._logprobs(self.ref, batch, batch.columns, loss.temperature)
        return logp.sum() * 0.0

    def _prefixes(self, batches: list[Batch], world_micro_batches: int) -> list[int]:
        """The common prefix each micro-batch index runs once (logprobs.shared_prefix), 0 where
        any rank runs that index in full. ZeRO-1/2 copy gradients into a flat buffer in the order
        they become ready and reduce it across ranks as if every rank had the same layout; the
        prefix path changes that order (the last layer's k/v finish after its q), so a rank that
        shared while another did not would sum one's q gradient into the other's v. Paths that
        agree give the same order whatever the prefix lengths. One small all-reduce per update."""
        import torch
        import torch.distributed as dist

        local = [shared_prefix(b.input_ids, b.attention_mask, int(b.columns[0]))
                 if self.share_prefix and b.columns.numel() else 0 for b in batches]
        local += [0] * (world_micro_batches - len(local))  # the filler pass: one row
        if self.engine.dp_world_size > 1 and self.share_prefix:
            every = torch.tensor([p > 0 for p in local], dtype=torch.int32, device=self.engine.device)
            dist.all_reduce(every, op=dist.ReduceOp.MIN, group=self.engine.data_parallel_group)
            local = [p if agreed else 0 for p, agreed in zip(local, every.tolist())]
        return local

    def update(self, samples: list[Sample], loss: LossConfig, norm: float,
               world_micro_batches: int) -> dict[str, float]:
        """Forward/backward every micro-batch of this rank's samples, then one optimizer step.

        `norm` is the batch denominator (all ranks), `world_micro_batches` the largest micro-batch
        count on any rank: ranks with fewer run empty passes, so every rank joins every collective
        (as does a micro-batch without a completion token: it contributes nothing).
        Returns this rank's statistics (objective.SUMS summed, objective.MAXIMA maxed) and the
        global gradient norm.
        """
        import torch

        engine = self.engine
        engine.train()
        batches = [collate(chunk, self.pad_id) for chunk in micro_batches(samples, loss.micro_batch)]
        assert len(batches) <= world_micro_batches
        prefixes = self._prefixes(batches, world_micro_batches)
        # DeepSpeed averages gradients over ranks; the aggregation already divides by `norm`.
        scale = float(engine.dp_world_size)
        totals: dict = {}
        for k in range(world_micro_batches):
            engine.set_gradient_accumulation_boundary(k == world_micro_batches - 1)
            if k < len(batches) and batches[k].columns.numel():
                objective, stats = self._chunk_loss(batches[k], prefixes[k], loss, norm)
                totals = accumulate(totals, stats)
            else:
                objective = self._filler_loss(loss)
            engine.backward(objective * scale, scale_wrt_gas=False)
            if k == world_micro_batches - 1 and engine.zero_optimization_stage() == 0:
                # stage 0 clips but does not record the norm: take it before the step (reduced)
                grads = [p.grad.detach().float().norm() for p in engine.module.parameters()
                         if p.grad is not None]
                stage0_norm = float(torch.stack(grads).norm()) if grads else 0.0
            engine.step()
        grad_norm = engine.get_global_grad_norm()
        if grad_norm is None and engine.zero_optimization_stage() == 0:
            grad_norm = stage0_norm
        keys = [*SUMS, *MAXIMA]
        values = (torch.stack([totals[k].float() for k in keys]).tolist() if totals  # one host sync
                  else [0.0] * len(keys))
        return {**dict(zip(keys, values)), "grad_norm": float(grad_norm) if grad_norm is not None else float("nan")}

    def named_weights(self):
        """(name, full tensor) for every parameter, gathered one at a time under ZeRO-3: what
        a colocated vLLM loads after each optimizer step. Collective under ZeRO-3."""
        import deepspeed

        zero3 = self.engine.zero_optimization_partition_weights()
        for name, param in self.module.named_parameters():
            if zero3:
                with deepspeed.zero.GatheredParameters([param]):
                    yield name, param.data.detach().clone()
            else:
                yield name, param.data.detach()

    # -- checkpoints -------------------------------------------------------------------------------

    def save(self, folder: Path, client_state: dict[str, Any]) -> None:
        """DeepSpeed state (weights, optimizer) + client state under folder/ds, HF weights under
        folder/hf. Collective: every rank calls it."""
        import torch.distributed as dist

        self.engine.save_checkpoint(str(folder / "ds"), tag="state", client_state=client_state)
        self.save_hf(folder / HF_DIR)
        dist.barrier()

    def save_hf(self, target: Path) -> None:
        """Plain HF weights (loadable by transformers, vLLM, `rollout --model`). Collective."""
        import torch.distributed as dist

        engine = self.engine
        if engine.zero_optimization_partition_weights():
            state = engine._zero3_consolidated_16bit_state_dict()
        else:
            state = engine.module.state_dict() if dist.get_rank() == 0 else None
        if dist.get_rank() == 0:
            target.mkdir(parents=True, exist_ok=True)
            module = engine.module
            # Training runs without a KV cache; whoever loads the checkpoint generates with one.
            module.config.use_cache = module.generation_config.use_cache = True
            try:
                module.save_pretrained(target, state_dict=state, safe_serialization=True)
            finally:
                module.config.use_cache = module.generation_config.use_cache = False
            self.tokenizer.save_pretrained(target)

    def load(self, folder: Path) -> dict[str, Any]:
        path, client_state = self.engine.load_checkpoint(str(folder / "ds"), tag="state")
        if path is None:
            raise EndstateError(f"{folder}/ds: no DeepSpeed checkpoint to resume from")
        return client_state
