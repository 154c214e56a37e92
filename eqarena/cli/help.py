"""How `--help` reads: conventional placeholders (TEXT, INTEGER, NUMBER, PATH, or the choices) instead of
Python types, and none on flags. Options keep their own metavar when they set one (e.g. SECONDS)."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import get_args, get_origin

from typer.core import TyperGroup

PLACEHOLDERS = {str: "TEXT", int: "INTEGER", float: "NUMBER", Path: "PATH"}


def placeholder(param) -> str | None:
    """What the help shows after an option's name: '' for a flag, the choices of an enum, else the
    conventional name of its type; None to leave it as typer draws it."""
    if getattr(param, "is_flag", False):
        return ""
    descriptor = getattr(param, "type_descriptor", None)
    annotation = getattr(descriptor, "annotation", None)
    if get_origin(annotation) is list:  # a repeatable option: the placeholder of one value
        annotation = get_args(annotation)[0]
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return "|".join(str(member.value) for member in annotation)
    return PLACEHOLDERS.get(annotation)


def tidy(params) -> None:
    for param in params:
        if param.param_type_name == "argument":
            # An argument's name (FORMAT, PATH...) and help say what it takes; no Python type beside them.
            param.display_type_rich = _no_type
        elif param.metavar is None:
            shown = placeholder(param)
            if shown is not None:
                param.metavar = shown


def _no_type(ctx) -> str:
    return ""


class TidyHelpGroup(TyperGroup):
    """The eqarena command groups: every command's options (and --help) drawn with placeholders."""

    def get_params(self, ctx):
        params = super().get_params(ctx)
        tidy(params)
        return params

    def get_command(self, ctx, cmd_name):
        command = super().get_command(ctx, cmd_name)
        if command is not None and not isinstance(command, TidyHelpGroup):
            tidy(command.params)
            help_option = command.get_help_option(ctx)
            if help_option is not None:
                tidy([help_option])
        return command
