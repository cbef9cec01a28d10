"""The dashboards ML engineers already watch (--report-to): TensorBoard event files under OUT/tb/
(the default) and Weights & Biases. Every number of a metrics.jsonl line is a scalar at its step
(its key as the tag), the held-out evaluation's pass@1 and interval are `eval/...` scalars, and the
pool's difficulty bands (bucket's records on the pool's tasks) a histogram and one scalar per band
at step 0. W&B is imported only when asked for; with no API key it runs offline (wandb sync
uploads it later). Rank 0 writes; the others hold no writer.
"""

from __future__ import annotations

import hashlib
import os
from collections import Counter
from pathlib import Path
from typing import Any

from endstate.core.errors import EndstateError


def scalars(line: dict[str, Any], prefix: str = "") -> dict[str, float]:
    """The numbers of a metrics line (bools as 0/1), nested mappings as `outer/inner`; lists and
    text are left out (the rounds log, retired task ids, the rollout_is level), and the held-out
    evaluation's eval_* keys, which Trainer.evaluate logs as eval/... at every evaluation."""
    out: dict[str, float] = {}
    for key, value in line.items():
        if isinstance(value, dict):
            out.update(scalars(value, f"{prefix}{key}/"))
        elif isinstance(value, (bool, int, float)) and key != "step" and not key.startswith("eval_"):
            out[prefix + key] = float(value)
    return out


class Dashboards:
    def __init__(self, report_to: list[str], out: Path, config: dict[str, Any], active: bool):
        self.tensorboard = self.wandb = None
        if not active:
            return
        if "tensorboard" in report_to:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError:
                raise EndstateError("--report-to tensorboard needs the tensorboard package: "
                                    "pip install tensorboard (or --report-to none)") from None
            self.tensorboard = SummaryWriter(str(out / "tb"))
        if "wandb" in report_to:
            self.wandb = _wandb_run(out, config)

    def log(self, step: int, values: dict[str, float]) -> None:
        for tag, value in values.items():
            if self.tensorboard:
                self.tensorboard.add_scalar(tag, value, step)
        if self.wandb:
            self.wandb.log(values, step=step)
        self.flush()

    def pool_bands(self, tasks: list[dict[str, Any]]) -> None:
        """The pool's difficulty as bucket cut it (its records' bands, hardest first, in the order
        of their `mass`): tasks per band, at step 0. Nothing for a pool without difficulty."""
        cut = [t["difficulty"] for t in tasks if isinstance(t.get("difficulty"), dict)]
        if not cut:
            return
        bands = Counter(d["band"] for d in cut)
        names = [*cut[0].get("mass", {}), *sorted(set(bands) - set(cut[0].get("mass", {})))]
        self.log(0, {f"pool/band/{name}": float(bands[name]) for name in names})
        if self.tensorboard:  # the band of every task, by its index in the hardest-first order
            import numpy as np

            index = [names.index(d["band"]) for d in cut]
            self.tensorboard.add_histogram("pool/band_index", np.array(index), 0,
                                           bins=np.arange(len(names) + 1) - 0.5)
            self.flush()

    def flush(self) -> None:
        if self.tensorboard:
            self.tensorboard.flush()

    def close(self) -> None:
        if self.tensorboard:
            self.tensorboard.close()
        if self.wandb:
            self.wandb.finish()


def _wandb_run(out: Path, config: dict[str, Any]):
    try:
        import wandb
    except ImportError:
        raise EndstateError("--report-to wandb needs the wandb package: pip install wandb") from None
    mode = os.environ.get("WANDB_MODE") or ("online" if os.environ.get("WANDB_API_KEY") else "offline")
    run_id = hashlib.sha256(str(out.resolve()).encode()).hexdigest()[:16]  # --resume: the same run
    return wandb.init(project=os.environ.get("WANDB_PROJECT", "endstate"), dir=str(out), id=run_id,
                      resume="allow", mode=mode, config=config, name=out.name)
