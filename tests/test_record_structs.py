"""The episode and graded-episode Structs that writers check records with (tools/core/schemas.py):
sound (a record they accept is valid by the JSON Schema) and fast on the common shapes."""

from __future__ import annotations

import copy

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from endstate.core.episode.replays import replay
from endstate.core.grading.grader import Grader
from endstate.core.records import schemas

JUNK = [None, True, 0, -1, 2.5, "", "x", "sha256:" + "0" * 64, [], {}, [{}], {"a": 1}, {"role": "user"},
        {"key": {}, "row": {}}, {"key": {"id": 1}, "row": {}, "extra": 1}, ["a"], "ok", "system_error",
        "agent_done", "user"]


@pytest.fixture(scope="module")
def samples(domains, tasks):
    """Real records of every kind the writers emit: replayed gold and empty episodes, graded."""
    out = []
    grader = Grader(domains)
    for task_id in ("retail-cancel-pending", "retail-change-email-by-name"):
        task = tasks.get(task_id)
        for steps in (task["gold"], []):
            episode = replay(domains[task["domain"]], task, steps)
            episode["turns"] = [{"prompt_ids": [1, 2], "completion_ids": [3], "logprobs": [-0.1]}]
            episode["usage"] = {"agent": {"prompt_tokens": 3, "completion_tokens": 1}}
            out += [("episode", episode), ("graded_episode", grader.grade(episode, task))]
    failed = {**out[0][1], "status": "system_error", "error": {"kind": "protocol", "message": "m"},
              "termination": None}
    out += [("episode", failed), ("graded_episode", {**failed, "reward": None, "checks": [],
                                                    "grader": {"version": "0"}})]
    return out


def test_the_common_shapes_take_the_fast_path(samples):
    for kind, record in samples:
        assert schemas.problem(kind, record) is None
        assert schemas.fast_check(kind)(orjson.dumps(record)), (kind, record["episode_id"])


def _paths(value, path=()):
    yield path
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, (*path, i))


def _mutate(record, path, action, junk):
    record = copy.deepcopy(record)
    *head, last = path
    parent = record
    for p in head:
        parent = parent[p]
    if action == "delete" and isinstance(parent, dict):
        del parent[last]
    elif action == "extra" and isinstance(parent[last], dict):
        parent[last]["extra_field"] = junk
    else:
        parent[last] = junk
    return record


@settings(max_examples=1500, deadline=None)
@given(st.data())
def test_fast_accept_implies_schema_valid(samples, data):
    kind, record = data.draw(st.sampled_from(samples))
    for _ in range(data.draw(st.integers(1, 3))):
        paths = [p for p in _paths(record) if p]
        path = data.draw(st.sampled_from(paths))
        record = _mutate(record, path, data.draw(st.sampled_from(["replace", "delete", "extra"])),
                         data.draw(st.sampled_from(JUNK)))
    if schemas.fast_check(kind)(orjson.dumps(record)):
        assert schemas.problem(kind, record) is None, record
