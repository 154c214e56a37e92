"""The command table (eqarena/flows.py): one row per command, each flow built from its row, and every
pipeline the command line runs is a row of it."""

from __future__ import annotations

import ast
import importlib
import inspect
import typing
from pathlib import Path

import pytest

from eqarena.flows import COMMANDS, FLOWS, flow_for
from eqarena.orchestration.commands import Command, flow_of

CLI = Path(__file__).resolve().parents[1] / "eqarena" / "cli"
# The paper's improvement-path simulation is a local experiment that draws its progress through a
# callback: `eqarena simulate` runs its pipeline as plain Python, never as a flow.
WITHOUT_A_FLOW = {("eqarena.pipelines.simulate", "simulate_improvement_path")}


def test_each_flow_is_built_from_its_row():
    assert len({c.name for c in COMMANDS}) == len(COMMANDS) == len(FLOWS)
    for command in COMMANDS:
        flow = FLOWS[command.name]
        assert flow.name == command.name
        assert flow.fn is command.function
        assert flow.flow_run_name is command.run_name
        assert flow.description == inspect.getdoc(command.function)
        # the flow takes the pipeline's parameters, so a deployment's parameters are the pipeline's
        assert list(flow.parameters.properties) == list(inspect.signature(command.function).parameters)
        assert flow_for(command.pipeline) is flow
        assert flow_of(command) is flow  # built once


def test_a_rows_options_type_is_what_its_pipeline_takes_first():
    for command in COMMANDS:
        hints = typing.get_type_hints(command.function)
        first = next(iter(inspect.signature(command.function).parameters))
        if command.options is None:
            assert not (isinstance(hints.get(first), type) and hints[first].__module__ == "eqarena.options")
        else:
            assert hints[first] is command.options, command.name


def _pipelines_the_cli_runs() -> list[tuple[str, str, str]]:
    """(cli file, pipeline module, function) for every pipeline function a cli module imports."""
    found = []
    for path in sorted(CLI.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("eqarena.pipelines."):
                found += [
                    (path.name, node.module, a.name) for a in node.names if (node.module, a.name) not in WITHOUT_A_FLOW
                ]
    return found


def test_every_pipeline_the_command_line_runs_is_a_row():
    runs = _pipelines_the_cli_runs()
    assert len(runs) >= len(COMMANDS)  # every command is run from the command line (report twice)
    pipelines = {c.pipeline for c in COMMANDS}
    for cli_file, module, name in runs:
        function = getattr(importlib.import_module(module), name)
        assert function in pipelines, f"{cli_file} runs {module}.{name}, which is not in the command table"
    assert {getattr(importlib.import_module(m), n) for _, m, n in runs} == pipelines


def test_flow_for_refuses_a_function_outside_the_table():
    with pytest.raises(KeyError):
        flow_for(len)


def test_a_command_row_names_the_function_under_a_subflow_wrapper():
    def pipeline(options, db=None):
        return options

    wrapped = Command("x", None, _wrapper(pipeline))
    assert wrapped.function is pipeline
    assert wrapped.pipeline("options") == "options"  # outside a flow run, a plain call
    assert Command("y", None, pipeline).function is pipeline


def _wrapper(fn):
    from eqarena.orchestration.commands import subflow

    return subflow(fn)
