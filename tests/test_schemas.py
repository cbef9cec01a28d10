"""The record contract: every schema is valid draft 2020-12 and every kind has a valid example."""

import orjson
import pytest
from jsonschema import Draft202012Validator

from endstate import SCHEMA_DIR
from endstate.core.records import schemas

EXAMPLES = SCHEMA_DIR / "examples"


@pytest.mark.parametrize("kind", schemas.RECORD_KINDS)
def test_schema_is_valid_and_has_a_valid_example(kind):
    schema = orjson.loads(schemas.schema_path(kind).read_bytes())
    Draft202012Validator.check_schema(schema)
    assert schema["$id"] == f"urn:endstate:{kind}"
    example = orjson.loads((EXAMPLES / f"{kind}.json").read_bytes())
    assert schemas.problem(kind, example) is None


def test_problem_names_the_field_and_the_schema():
    example = orjson.loads((EXAMPLES / "attempt.json").read_bytes())
    message = schemas.problem("attempt", {**example, "reward": 2})
    assert message.startswith("attempt record.reward: 2 is not one of [0, 1, None]")
    assert "schemas/attempt.schema.json" in message


@pytest.mark.parametrize("wanted, came, step", [
    ("attempt", "episode", "pipe the episodes through `grade`"),
    ("episode", "task", "run the tasks with `rollout`"),
    ("task", "episode", "this command reads tasks"),
    ("task", "attempt", "this command reads tasks"),
])
def test_a_record_of_the_wrong_pipeline_stage_is_told_the_step_between(wanted, came, step):
    record = orjson.loads((EXAMPLES / f"{came}.json").read_bytes())
    assert schemas.problem(came, record) is None and step in schemas.problem(wanted, record)
    example = orjson.loads((EXAMPLES / f"{wanted}.json").read_bytes())
    assert "the record is" not in schemas.problem(wanted, {**example, "domain": 5})


def test_system_error_must_carry_null_reward():
    example = orjson.loads((EXAMPLES / "attempt.json").read_bytes())
    assert schemas.problem("attempt", {**example, "status": "system_error", "reward": 0})
    assert schemas.problem("attempt", {**example, "status": "system_error", "reward": None}) is None
    graded = orjson.loads((EXAMPLES / "graded_episode.json").read_bytes())
    assert schemas.problem("graded_episode", {**graded, "status": "system_error", "reward": 1})


def test_task_without_checks_is_invalid():
    task = orjson.loads((EXAMPLES / "task.json").read_bytes())
    assert "should be non-empty" in schemas.problem("task", {**task, "checks": []})
    assert "checks" in schemas.problem("task", {k: v for k, v in task.items() if k != "checks"})


def test_check_errors_point_at_the_check():
    task = orjson.loads((EXAMPLES / "task.json").read_bytes())
    bad = {**task, "checks": [{"kind": "row", "table": "orders", "expect": {"id": "W1"}}]}
    assert schemas.problem("task", bad) == (
        "task record.checks[0]: 'where' is a required property (schema: schemas/task.schema.json)")
