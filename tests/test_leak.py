"""The leak guard reads content: a training pool may not hold a copy of a bench or ood task, under
any id, split or tags, in bucket --tasks and in grpo's pool; the built-in training suites hold none."""

from __future__ import annotations

import shutil

import orjson
import pytest
from click.testing import CliRunner
from conftest import ROOT

from endstate import TASKS_DIR
from endstate.bucket.cli import cli as bucket
from endstate.core.episode.leak import fingerprint
from endstate.grpo.cli import cli as grpo

BENCH_FILE = TASKS_DIR / "bench" / "retail.jsonl"
BENCH_ID = "retail-return-two-lines"  # several rows in one init table, several checks and gold steps


def bench_task() -> tuple[int, dict]:
    """(line, task) of BENCH_ID in the built-in retail bench suite."""
    for line, raw in enumerate(BENCH_FILE.read_bytes().splitlines(), 1):
        task = orjson.loads(raw)
        if task["id"] == BENCH_ID:
            return line, task
    raise AssertionError(f"{BENCH_ID} is not in {BENCH_FILE}")


def reversed_keys(value):
    if isinstance(value, dict):
        return {k: reversed_keys(value[k]) for k in reversed(value)}
    if isinstance(value, list):
        return [reversed_keys(v) for v in value]
    return value


def renamed(task: dict) -> dict:
    return {**task, "id": "shop-return", "split": "train", "tags": ["template:copied"],
            "notes": "copied from the benchmark", "max_turns": 7}


def reordered(task: dict) -> dict:
    """A copy in another order and spelling: keys, init tables and their rows, checks and gold
    steps reversed; the instruction upper-cased with blanks added; whole numbers written as floats."""
    def as_float(row):
        return {k: float(v) if type(v) is int else v for k, v in row.items()}

    copy = reversed_keys(renamed(task))
    copy["init"] = {table: [as_float(r) for r in reversed(rows)]
                    for table, rows in reversed(copy["init"].items())}
    copy["checks"], copy["gold"] = copy["checks"][::-1], copy["gold"][::-1]
    user = copy["user"]
    copy["user"] = {**user, "instruction": "  " + user["instruction"].upper().replace(" ", " \n\t ") + " "}
    return copy


def pool_file(tmp_path, *tasks) -> str:
    """A pool of a real training task followed by `tasks`."""
    train = orjson.loads((ROOT / "tasks/train/retail.jsonl").read_bytes().splitlines()[0])
    path = tmp_path / "pool.jsonl"
    path.write_bytes(b"".join(orjson.dumps(t) + b"\n" for t in (train, *tasks)))
    return str(path)


def refusal(pool: str, bench_file, bench_line: int, flag: str) -> str:
    return (f"1 task(s) in {pool} have the content of a held-out task (the same domain, init, user "
            "instruction and opening, checks and gold, whatever the id, split or tags): "
            f"shop-return ({pool}:2) is bench task {BENCH_ID} ({bench_file}:{bench_line}); take them "
            f"out of the pool, or pass {flag} if you mean to train on them\n")


def run_bucket(pool: str, *flags: str, env=None):
    return CliRunner().invoke(bucket, ["--all", "--tasks", pool, *flags], input="", env=env)


def run_grpo(pool: str, tmp_path, *flags: str):
    return CliRunner().invoke(grpo, ["train", "--pool", pool, "--out", str(tmp_path / "run"),
                                     "--dry-run", *flags])


@pytest.mark.parametrize("copy", [renamed, reordered])
def test_a_copied_bench_task_is_refused_by_bucket_and_grpo_naming_both(tmp_path, copy):
    line, task = bench_task()
    pool = pool_file(tmp_path, copy(task))
    result = run_bucket(pool)
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr == refusal(pool, BENCH_FILE, line, "--allow-bench")
    result = run_grpo(pool, tmp_path)
    assert result.exit_code == 2
    assert result.output == refusal(pool, BENCH_FILE, line, "--allow-bench (YAML: allow_bench: true)")
    assert run_bucket(pool, "--allow-bench").exit_code == 0


def test_a_task_with_another_instruction_passes_both(tmp_path):
    _, task = bench_task()
    other = renamed(task)
    other["user"] = {**task["user"], "instruction": task["user"]["instruction"] + " You are in a hurry."}
    pool = pool_file(tmp_path, other)
    result = run_bucket(pool)
    assert result.exit_code == 0, result.output
    assert [orjson.loads(x)["id"] for x in result.stdout.splitlines()][1] == "shop-return"
    result = run_grpo(pool, tmp_path)
    assert result.exit_code == 0, result.output
    assert "pool_tasks: 2" in result.output


def test_a_bench_task_of_a_user_domain_folder_is_guarded_too(tmp_path):
    """The suites a run knows include each domain folder's tasks/ (bucket: $ENDSTATE_DOMAINS;
    grpo: --domains too)."""
    _, task = bench_task()
    folder = tmp_path / "domains" / "shop"
    shutil.copytree(ROOT / "domains" / "retail", folder)
    (folder / "tasks").mkdir()
    theirs = folder / "tasks" / "bench.jsonl"
    original = {**task, "domain": "shop"}
    theirs.write_bytes(orjson.dumps({**task, "id": "other"}) + b"\n" + orjson.dumps(original) + b"\n")
    pool = pool_file(tmp_path, {**renamed(task), "domain": "shop"})
    env = {"ENDSTATE_DOMAINS": str(tmp_path / "domains")}
    result = run_bucket(pool, env=env)
    assert result.exit_code == 2
    assert result.stderr == refusal(pool, theirs, 2, "--allow-bench")
    assert run_bucket(pool).exit_code == 0  # without the folder, nothing holds that content
    result = run_grpo(pool, tmp_path, "--domains", str(folder))
    assert result.exit_code == 2
    assert result.output == refusal(pool, theirs, 2, "--allow-bench (YAML: allow_bench: true)")


def test_the_built_in_training_suites_copy_no_bench_or_ood_task(tmp_path):
    pool = tmp_path / "train.jsonl"
    pool.write_bytes(b"".join(p.read_bytes() for p in sorted((ROOT / "tasks" / "train").glob("*.jsonl"))))
    result = run_bucket(str(pool))
    assert result.exit_code == 0, result.stderr
    assert len(result.stdout.splitlines()) == len(pool.read_bytes().splitlines())
    # the training suites carry judge checks: a judge configured (a dry run calls nobody)
    result = run_grpo(str(pool), tmp_path, "--judge-model", "judge", "--judge-base-url", "http://127.0.0.1:9/v1")
    assert result.exit_code == 0, result.output


# --- what the fingerprint counts -----------------------------------------------------------------

def test_what_makes_another_task_and_what_does_not():
    _, task = bench_task()
    same = [renamed(task), reordered(task), {**task, "tools": ["get_order"]},
            {**task, "user": {**task["user"], "script": ["something else"]}}, {**task, "difficulty": {}}]
    assert {fingerprint(t) for t in same} == {fingerprint(task)}
    first_row = {**task["init"]["order_items"][0], "quantity": 5}
    other = [{**task, "domain": "shop"},
             {**task, "user": {**task["user"], "opening": "Hello there"}},
             {**task, "user": {**task["user"], "instruction": "Return nothing."}},
             {**task, "init": {**task["init"], "order_items": [first_row, *task["init"]["order_items"][1:]]}},
             {**task, "checks": task["checks"][1:]},
             {**task, "gold": task["gold"][1:]}]
    prints = [fingerprint(t) for t in other]
    assert len(set(prints)) == len(other) and fingerprint(task) not in prints
