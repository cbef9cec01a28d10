"""The metrics object (schemas/metrics.schema.json) as Structs: what metrics.py builds and the
renderers and figures read. On the wire each statistic (statistics.py) is two maps, NAME and
NAME_ci95 (k -> value), and a group's groups are by_FIELD maps; here they are `at_k` and `by`, so
the JSON is made here (to_builtins) and read back here (decode)."""

from __future__ import annotations

from typing import Any

import msgspec

from endstate.evalstats.statistics import STATISTICS


class ObservedAll(msgspec.Struct, kw_only=True):
    """Tasks whose every clean attempt succeeded (metrics.observed_all)."""

    k: int | None
    k_min: int | None = None
    k_max: int | None = None
    count: int | None
    fraction: float | None
    ci95: list[float] | None = None


class Cost(msgspec.Struct, kw_only=True):
    """Campaign cost (metrics.cost)."""

    total_usd: float | None
    per_success_usd: float | None
    per_reliable_task_usd: float | None
    priced_attempts: int = 0
    unpriced_attempts: int = 0
    recorded_attempts: int = 0


class AtK(msgspec.Struct):
    """One statistic of a group by k ("5"): its value and 95% interval, null where some task has
    fewer than k clean attempts."""

    value: dict[str, float | None]
    ci95: dict[str, list[float] | None]


class Group(msgspec.Struct, kw_only=True):
    """The metrics of one group of tasks; the fields in the order the JSON has them."""

    tasks: int
    policies: int = 1
    attempts: int
    system_errors: int
    successes: int
    estimand: str = "population"
    cluster: str | None = None
    clusters: int | None = None
    pass_at_1: float | None
    pass_at_1_se: float | None
    pass_at_1_ci95: list[float] | None
    pass_at_1_task_mean: float | None = None
    pass_at_1_task_mean_se: float | None = None
    pass_at_1_task_mean_ci95: list[float] | None = None
    at_k: dict[str, AtK]  # statistic name -> its values by k, in STATISTICS' order
    observed_all: ObservedAll
    cost: Cost
    by: dict[str, dict[str, Group]] = {}  # the second --by field's groups within this one

    @property
    def pooled(self) -> bool:
        """The group pools several policies (metrics.pooled_policies)."""
        return self.policies >= 2

    def value(self, statistic: str, k: str | None) -> float | None:
        """The statistic at k; None where the group has none there."""
        at = self.at_k.get(statistic)
        return None if at is None or k is None else at.value.get(k)

    def to_builtins(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in self.__struct_fields__:
            if name == "at_k":
                for statistic, at in self.at_k.items():
                    out[statistic], out[f"{statistic}_ci95"] = at.value, at.ci95
            elif name != "by":
                out[name] = msgspec.to_builtins(getattr(self, name))
        return {**out, **_by_builtins(self.by)}


class Report(msgspec.Struct):
    """summary's object: `overall`, and per --by field its groups (`by`, by_FIELD on the wire)."""

    overall: Group
    by: dict[str, dict[str, Group]] = {}

    def to_builtins(self) -> dict[str, Any]:
        return {"overall": self.overall.to_builtins(), **_by_builtins(self.by)}


def _by_builtins(by: dict[str, dict[str, Group]]) -> dict[str, Any]:
    return {f"by_{field}": {name: g.to_builtins() for name, g in groups.items()}
            for field, groups in by.items()}


def _shape(obj: dict[str, Any]) -> dict[str, Any]:
    """A JSON group (or report) in the Structs' builtin form: NAME/NAME_ci95 into at_k,
    by_FIELD into by."""
    return {**obj,
            "at_k": {name: {"value": obj[name], "ci95": obj.get(f"{name}_ci95") or {}}
                     for name in STATISTICS if name in obj},
            "by": {key[3:]: {name: _shape(g) for name, g in groups.items()}
                   for key, groups in obj.items() if key.startswith("by_")}}


def decode(obj: dict[str, Any]) -> Report:
    """summary's JSON object (as `evalstats --format json` writes it) as a Report."""
    return msgspec.convert({**_shape(obj), "overall": _shape(obj["overall"])}, Report)
