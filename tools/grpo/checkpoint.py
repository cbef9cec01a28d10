"""Checkpoint folders and the state that makes --resume exact.

    OUT/checkpoints/step-000005/hf/        plain HF weights + tokenizer (rollout --model, vLLM)
    OUT/checkpoints/step-000005/ds/        DeepSpeed engine state (weights, AdamW moments)
    OUT/checkpoints/step-000005/state.json step, pool sampler, attempt counters (also in ds/)
    OUT/checkpoints/latest                 the name of the newest complete checkpoint

`latest` is written last, by rank 0, after every rank has saved: a run killed mid-save resumes
from the previous checkpoint.
"""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path
from typing import Any

import orjson

from endstate.core.errors import FileError
from endstate.core.records.jsonl import dumps
from endstate.core.records.structs import Prompting


def checkpoint_dir(out: Path, step: int) -> Path:
    return out / "checkpoints" / f"step-{step:06d}"


def latest_checkpoint(out: Path) -> Path | None:
    marker = out / "checkpoints" / "latest"
    if not marker.exists():
        return None
    return out / "checkpoints" / marker.read_text().strip()


def save_checkpoint(policy, out: Path, step: int, client_state: dict[str, Any],
                    prompting: Prompting) -> Path:
    """Save the step; its HF folder also records how the policy was prompted in training, so
    rollout and probe prompt it the same way by default (core.prompting)."""
    import torch.distributed as dist

    from endstate.core.agent.prompting import record
    from endstate.grpo.engine import HF_DIR

    folder = checkpoint_dir(out, step)
    try:
        policy.save(folder, client_state)  # collective
        if dist.get_rank() == 0:
            record(folder / HF_DIR, prompting)
            public = {k: v for k, v in client_state.items() if k != "rng"}
            (folder / "state.json").write_bytes(orjson.dumps(public, option=orjson.OPT_INDENT_2))
            tmp = out / "checkpoints" / ".latest.tmp"
            tmp.write_text(folder.name + "\n")
            os.replace(tmp, out / "checkpoints" / "latest")
    except (OSError, RuntimeError) as e:  # torch reports a full disk as "unexpected pos N vs M"
        raise save_failed(out, folder, e) from None
    dist.barrier()
    return folder


def save_failed(out: Path, folder: Path, error: Exception) -> FileError:
    """What a user needs when a checkpoint cannot be written (a full disk, most often): the
    space left, and that --resume starts from the last complete checkpoint."""
    existing = next(p for p in (folder, *folder.parents) if p.exists())
    free = shutil.disk_usage(existing).free
    last = latest_checkpoint(out)
    resume = (f"--resume continues from {last.name}" if last
              else "no checkpoint is complete yet, so a rerun starts over")
    return FileError(f"{folder}: cannot save the checkpoint ({error}); {free / 2**30:.1f} GiB "
                     f"free on that disk. Free space, or give --out a bigger disk; {resume}")


def rng_state() -> dict[str, Any]:
    """Python, NumPy and torch generator states as plain lists (checkpoint-safe)."""
    import numpy as np
    import torch

    version, internal, gauss = random.getstate()
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    state = {"python": [version, list(internal), gauss],
             "numpy": [kind, keys.tolist(), int(pos), int(has_gauss), float(cached)],
             "torch": torch.get_rng_state().tolist()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state().tolist()
    return state


def restore_rng(state: dict[str, Any]) -> None:
    import numpy as np
    import torch

    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    kind, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((kind, np.array(keys, dtype=np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(torch.tensor(state["torch"], dtype=torch.uint8))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state(torch.tensor(state["cuda"], dtype=torch.uint8))


def truncate_log(path: Path, step: int) -> int:
    """Keep the lines of a per-step log (metrics or attempts) with step ≤ `step`: lines written
    after the checkpoint we resume from are written again. Returns the lines dropped."""
    if not path.exists():
        return 0
    kept, dropped = [], 0
    for raw in path.read_bytes().split(b"\n"):
        if not raw.strip():
            continue
        try:
            record = orjson.loads(raw)
        except orjson.JSONDecodeError:  # a line cut by the kill
            dropped += 1
            continue
        if record.get("step", 0) <= step:
            kept.append(record)
        else:
            dropped += 1
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(b"".join(dumps(r) for r in kept))
    os.replace(tmp, path)
    return dropped
