"""`grpo export`: a DeepSpeed checkpoint as a plain HF folder (fp32 weights from the engine state,
so it works for every ZeRO stage and does not depend on the hf/ copy written during training)."""

from __future__ import annotations

import shutil
from pathlib import Path

from endstate.core.agent.prompting import PROMPTING_FILE
from endstate.core.errors import EndstateError
from endstate.grpo.checkpoint import latest_checkpoint
from endstate.grpo.engine import HF_DIR

TAG = "state"


def find_checkpoint(path: Path) -> Path:
    """A step folder as is; a run folder means its latest checkpoint."""
    if (path / "ds").is_dir():
        return path
    latest = latest_checkpoint(path)
    if latest is None or not (latest / "ds").is_dir():
        raise EndstateError(f"{path}: neither a checkpoint folder (with ds/) nor a grpo run folder "
                            "(with checkpoints/latest)")
    return latest


def engine_state_dict(ds_dir: Path) -> dict:
    """fp32 module weights from a DeepSpeed checkpoint: ZeRO 1-3 via zero_to_fp32, stage 0 from
    the module states file."""
    import torch

    stage0 = ds_dir / TAG / "mp_rank_00_model_states.pt"
    optim = list((ds_dir / TAG).glob("*optim_states.pt"))
    if optim:
        from deepspeed.utils.zero_to_fp32 import get_fp32_state_dict_from_zero_checkpoint

        return get_fp32_state_dict_from_zero_checkpoint(str(ds_dir), tag=TAG)
    if not stage0.exists():
        raise EndstateError(f"{ds_dir}/{TAG}: no DeepSpeed model states")
    state = torch.load(stage0, map_location="cpu", weights_only=False)["module"]
    return {k: v.float() for k, v in state.items()}


def export_checkpoint(checkpoint: Path, target: Path) -> Path:
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging

    logging.disable_progress_bar()  # save_pretrained's bar: stderr carries endstate's words only
    folder = find_checkpoint(checkpoint)
    hf = folder / HF_DIR
    if not (hf / "config.json").exists():
        raise EndstateError(f"{hf}: no config.json to rebuild the model from")
    model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(hf))
    missing, unexpected = model.load_state_dict(engine_state_dict(folder / "ds"), strict=False)
    missing = [k for k in missing if not k.endswith("lm_head.weight")]  # tied to the embeddings
    if missing or unexpected:
        raise EndstateError(f"{folder}: checkpoint does not match the model config "
                            f"(missing {missing[:3]}, unexpected {unexpected[:3]})")
    if getattr(model.config, "tie_word_embeddings", False):
        model.tie_weights()
    target.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(target, safe_serialization=True)
    AutoTokenizer.from_pretrained(hf).save_pretrained(target)
    if (hf / PROMPTING_FILE).exists():  # how it was prompted in training travels with it
        shutil.copyfile(hf / PROMPTING_FILE, target / PROMPTING_FILE)
    return folder
