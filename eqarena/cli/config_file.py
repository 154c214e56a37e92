"""`--config FILE`: a TOML file of option values for `rate`, `run` and `refresh`; flags given on the
command line override it.

    # eqarena.toml
    db = "ratings.duckdb"          # top level: every command that has the option
    methods = "ne,cce,bt"
    bootstrap = 100

    [rate]                         # one command's table, over the top level for that command
    judge = ["prd:gpt4", "prd:claude"]
    missing = "impute"

    [run]
    judge = "prd:gpt4"

Keys are the long flags without their dashes (`bootstrap-time` or `bootstrap_time`). A key no such
command has, a table for another command, or a file that is not TOML is an error naming the file and
the key. Values go through the same checks as flags (the command line reads them as the options'
defaults: its context's `default_map`); paths are relative to the working directory, as on the command line.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import typer

from eqarena.exceptions import EqarenaError
from eqarena.messages import bounded

CONFIG_COMMANDS = ("rate", "run", "refresh")  # the commands that take --config
CONFIG_HELP = (
    "A TOML file of option values (keys: the long flags without dashes, e.g. bootstrap = 100, "
    'judge = ["prd:gpt4"]; a [rate], [run] or [refresh] table for one command); flags given here override it.'
)


class ConfigFileError(EqarenaError):
    """A --config file that cannot be read, or a key or value in it that no option takes."""


def _load(ctx: typer.Context, param, value: Path | None) -> Path | None:
    if value is None:
        return None
    try:
        defaults = config_defaults(value, ctx, _siblings(ctx))
    except ConfigFileError as exc:
        typer.echo(f"error: {bounded(exc)}", err=True)
        raise typer.Exit(1) from None
    ctx.default_map = {**(ctx.default_map or {}), **defaults}
    return value


CONFIG = typer.Option(None, "--config", metavar="FILE", is_eager=True, callback=_load, help=CONFIG_HELP)


def config_defaults(path: Path, ctx: typer.Context, siblings: dict) -> dict:
    """The option values `path` gives the command of `ctx` ({parameter name: value}): its top-level keys
    that the command has, then its `[<command>]` table, each checked as its flag would be. Keys of the
    other `CONFIG_COMMANDS` (`siblings`) at the top level are skipped for commands without them;
    anything else unknown is an error (ConfigFileError)."""
    command = ctx.command
    data = _read(path)
    known = _options(command)
    shared = set().union(*(_options(c) for c in siblings.values())) | set(known)
    values: dict = {}
    for key, value in data.items():
        if key in CONFIG_COMMANDS:
            if not isinstance(value, dict):
                raise ConfigFileError(f"{path}: [{key}] must be a table of options")
            continue
        name = _name(key)
        if name not in shared:
            raise ConfigFileError(f"{path}: unknown key {key!r} (not an option of {', '.join(CONFIG_COMMANDS)})")
        if name in known:
            values[name] = _value(ctx, path, key, known[name], value)
    for key, value in data.get(command.name, {}).items():
        name = _name(key)
        if name not in known:
            raise ConfigFileError(
                f"{path}: [{command.name}] {key!r} is not an option of {command.name} "
                f"(its options: {', '.join(sorted(k.replace('_', '-') for k in known))})"
            )
        values[name] = _value(ctx, path, f"[{command.name}] {key}", known[name], value)
    return values


def _read(path: Path) -> dict:
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigFileError(f"{path}: no such file") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigFileError(f"{path}: not a TOML file ({exc})") from None


def _options(command) -> dict:
    """The command's options by parameter name (its arguments and --config left out)."""
    return {p.name: p for p in command.params if p.param_type_name == "option" and p.name and p.name != "config"}


def _name(key: str) -> str:
    return key.strip().lstrip("-").replace("-", "_")


def _value(ctx: typer.Context, path: Path, key: str, option, value):
    """`value` as the option takes it (a single value for a repeatable option becomes a one-item list),
    checked by the option's type: an error names the file and the key."""
    value = [value] if option.multiple and not isinstance(value, list) else value
    runtime = getattr(option, "get_runtime_param", None)  # Typer's coercion of a flag's value (else checked later)
    try:
        if runtime is not None and not isinstance(value, bool):
            runtime().coerce(value, param=option, ctx=ctx)
    except typer.BadParameter as exc:
        raise ConfigFileError(f"{path}: {key} = {value!r}: {exc.format_message()}") from None
    return value


def _siblings(ctx: typer.Context) -> dict:
    get_command = getattr(ctx.parent.command, "get_command", None) if ctx.parent is not None else None
    if get_command is None:
        return {}
    found = {name: get_command(ctx, name) for name in CONFIG_COMMANDS}
    return {name: command for name, command in found.items() if command is not None}
