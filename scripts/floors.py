"""Print each `>=` floor of endstate's dependencies (the core, plus the extras named as arguments)
as an `==` pin: the constraints `make compat` installs, so the declared floors are the tested ones.

    python scripts/floors.py local test > floors.txt
"""

import re
import sys
import tomllib
from pathlib import Path

project = tomllib.loads((Path(__file__).resolve().parent.parent / "pyproject.toml").read_text())["project"]
requirements = list(project["dependencies"])
for extra in sys.argv[1:]:
    requirements += project["optional-dependencies"][extra]
floors: dict[str, str] = {}  # a package floored twice (the core, an extra): the higher floor holds


def release(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version))


for requirement in requirements:
    if m := re.fullmatch(r"([A-Za-z0-9_.\-]+)>=([^,;\s]+)", requirement):
        name, version = m.group(1).lower(), m.group(2)
        if name not in floors or release(version) > release(floors[name]):
            floors[name] = version
for name, version in floors.items():
    print(f"{name}=={version}")
