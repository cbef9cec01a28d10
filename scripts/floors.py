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
for requirement in requirements:
    if m := re.fullmatch(r"([A-Za-z0-9_.\-]+)>=([^,;\s]+)", requirement):
        print(f"{m.group(1)}=={m.group(2)}")
