"""The figures `make bench` keeps: each benchmark records its ratios here, bench/compare.py sets
them against bench/baseline.json.

    from results import record
    record("sandbox.episode_ms", 1.21, "ms", better="lower")

With ENDSTATE_BENCH_RESULTS set (make bench sets it), each figure is merged into that JSON file
(one object, figure name -> {value, unit, better}); without it record only returns.
"""

from __future__ import annotations

import json
import os
from pathlib import Path


def record(name: str, value: float, unit: str, better: str) -> None:
    if better not in ("lower", "higher"):
        raise ValueError(f"better is 'lower' or 'higher', not {better!r}")
    target = os.environ.get("ENDSTATE_BENCH_RESULTS")
    if not target:
        return
    path = Path(target)
    figures = json.loads(path.read_text()) if path.exists() and path.stat().st_size else {}
    figures[name] = {"value": round(float(value), 4), "unit": unit, "better": better}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(figures, indent=1, sort_keys=True) + "\n")
