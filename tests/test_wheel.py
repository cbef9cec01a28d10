"""A non-editable install: build the wheel from a copy of the sources, install it into a new venv,
and run the tools from a folder outside the checkout. They must find the built-in schemas,
domains, task suites and DeepSpeed configs inside the installed package."""

import json
import os
import subprocess
import sys
import sysconfig

from conftest import build_wheel


def test_an_installed_wheel_finds_its_builtin_data(tmp_path):
    pip = [sys.executable, "-m", "pip"]
    wheel, output = build_wheel(tmp_path)
    # A newcomer's `make setup` prints these once per data folder unless pyproject names it.
    assert "absent from the `packages` configuration" not in output
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    subprocess.run([*pip, "--python", venv / "bin" / "python", "install", "-q", "--no-deps",
                    "--no-index", wheel], check=True, capture_output=True)
    # The dependencies come from the test venv (a path, not its .pth files: the editable
    # endstate there stays invisible), so the package imported is the wheel's.
    site = next((venv / "lib").glob("python3*/site-packages"))
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    outside = tmp_path / "elsewhere"
    outside.mkdir()

    def tool(*args: str) -> subprocess.CompletedProcess:
        p = subprocess.run([str(venv / "bin" / args[0]), *args[1:]], capture_output=True, text=True,
                           cwd=outside, timeout=600, env={**os.environ, "PYTHONPATH": ""})
        assert p.returncode == 0, f"{args}: exit {p.returncode}: {p.stderr[-2000:]}"
        return p

    where = subprocess.run([venv / "bin" / "python", "-c", "import endstate; print(endstate.BUILTIN)"],
                           capture_output=True, text=True, check=True, cwd=outside,
                           env={**os.environ, "PYTHONPATH": ""}).stdout.strip()  # as tool() runs
    assert where.startswith(str(venv)), where  # the wheel's copy, not the checkout

    summary = tool("grade", "tasks", "--summary").stdout
    assert "retail" in summary and "bench" in summary
    bench = os.path.join(where, "tasks", "bench", "retail.jsonl")
    verdicts = [json.loads(line) for line in tool("grade", "validate", bench).stdout.splitlines()]
    assert verdicts and all(v["sound"] for v in verdicts)
    first = tool("grade", "tasks", "--full", bench).stdout.splitlines()[0]
    (outside / "one.jsonl").write_text(first + "\n")
    episode = json.loads(tool("rollout", "run", "one.jsonl", "--max-new-tokens", "8",
                              "--max-turns", "1").stdout)
    assert episode["status"] == "ok"
    # a training pool holds train-split tasks (a bench task there is refused: the leak guard)
    pool = tool("grade", "tasks", "--full", "--split", "train", "--domain", "retail").stdout
    (outside / "pool.jsonl").write_text(pool.splitlines()[0] + "\n")
    dry = tool("grpo", "train", "--pool", "pool.jsonl", "--out", "run", "--deepspeed", "zero2",
               "--dry-run").stdout
    assert "deepspeed_config: " + os.path.join(where, "configs", "deepspeed", "zero2.json") in dry
