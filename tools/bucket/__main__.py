"""python -m endstate.bucket"""

from endstate.bucket.cli import main

main()
