"""Policy losses beyond the clipped surrogate (algorithm.ppo_clip), one module each: a module here
registers its loss with `@POLICY_LOSSES.register(name)` (algorithm.PolicyLoss's signature), and
importing this package imports every module in it, so a new loss is one new file (and its test).
The update (objective.py) and the CLI (config.py) import it before they look a name up."""

import importlib
import pkgutil

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
