"""python -m endstate.rollout"""

from endstate.rollout.cli import main

main()
