"""python -m endstate.evalstats"""

from endstate.evalstats.cli import main

main()
