"""`python -m eqarena.cli ...` runs the command line."""

from eqarena.cli.app import main

main()
