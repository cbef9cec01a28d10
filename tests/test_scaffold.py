"""`grade new-domain NAME`: the scaffold it writes loads, seeds, and validates sound as written."""

import json

import pytest
from conftest import run_tool


def test_the_scaffold_validates_sound_out_of_the_box(tmp_path):
    p = run_tool("grade", "new-domain", "shop", "--out", str(tmp_path))
    assert p.returncode == 0, p.stderr
    assert p.stdout == ""
    folder = tmp_path / "shop"
    # __pycache__: Python's own, where it may write bytecode (PYTHONDONTWRITEBYTECODE unset)
    assert sorted(str(f.relative_to(folder)) for f in folder.rglob("*")
                  if f.is_file() and "__pycache__" not in f.relative_to(folder).parts) == [
        "policy.md", "schema.sql", "seed.py", "tasks/shop.jsonl", "tools.py"]
    tasks = folder / "tasks" / "shop.jsonl"
    assert f"grade validate --domains {folder} {tasks}" in p.stderr  # the next step, runnable
    p = run_tool("grade", "validate", "--domains", str(folder), str(tasks))
    assert p.returncode == 0, p.stderr
    verdicts = [json.loads(line) for line in p.stdout.splitlines()]
    assert [(v["task_id"], v["sound"], v["gold_reward"], v["empty_reward"]) for v in verdicts] == [
        ("shop-upgrade", True, 1, 0), ("shop-which-plan", True, 1, 0)]
    p = run_tool("grade", "tasks", "--domains", str(folder), str(tasks))
    listed = [json.loads(line) for line in p.stdout.splitlines()]
    assert [(t["gold_calls"], t["gold_writes"]) for t in listed] == [(2, 1), (1, 0)]


def test_the_scaffold_defaults_to_the_current_folder(tmp_path):
    p = run_tool("grade", "new-domain", "desk", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "desk" / "tools.py").exists()


@pytest.mark.parametrize("name, message", [
    ("Shop", "domain name 'Shop': use lowercase letters"),
    ("9lives", "domain name '9lives': use lowercase letters"),
    ("a/b", "domain name 'a/b': use lowercase letters"),
])
def test_a_bad_name_is_refused(tmp_path, name, message):
    p = run_tool("grade", "new-domain", name, "--out", str(tmp_path))
    assert p.returncode == 2
    assert message in p.stderr
    assert not any(tmp_path.iterdir())


def test_an_existing_folder_is_never_overwritten(tmp_path):
    (tmp_path / "shop").mkdir()
    (tmp_path / "shop" / "tools.py").write_text("# mine\n")
    p = run_tool("grade", "new-domain", "shop", "--out", str(tmp_path))
    assert p.returncode == 2
    assert "exists already" in p.stderr
    assert (tmp_path / "shop" / "tools.py").read_text() == "# mine\n"
