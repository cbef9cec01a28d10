"""scripts/floors.py: the `==` pins `make compat` installs are the declared `>=` floors, one per
package: where the core and an extra both floor a package, the higher floor is the one that holds."""

import subprocess
import sys

from conftest import ROOT


def floors(*extras: str) -> list[str]:
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "floors.py"), *extras],
                          capture_output=True, text=True, check=True)
    return done.stdout.splitlines()


def test_a_package_floored_twice_is_pinned_once_at_the_higher_floor():
    assert [p for p in floors() if p.startswith("rich==")] == ["rich==13"]
    assert [p for p in floors("openenv") if p.startswith("rich==")] == ["rich==13.9.4"]
    assert "openenv-core==0.3.0" in floors("openenv")
