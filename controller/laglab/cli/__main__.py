"""python -m laglab.cli: the `laglab` command (./laglab at the repository root)."""

from laglab.cli import main

main()
