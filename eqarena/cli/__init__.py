"""The `eqarena` command line (typer): one module per group of commands, each parsing flags into typed
options (`eqarena.options`) and calling a flow; `eqarena.cli.support` holds what every command shares."""

from eqarena.cli.app import main

__all__ = ["main"]
