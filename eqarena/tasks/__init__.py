"""The pipeline's steps, which the pipelines of `eqarena.pipelines` (and the flows) compose.

A "task" here is one step of a pipeline: most are `@step`s (eqarena/orchestration/steps.py: a Prefect
task run inside a Prefect flow run, a plain call otherwise; the judge's are Prefect tasks); the rest are
the plain functions and small classes those steps share (run bookkeeping in `runs`, the judge session,
the process pool of `parallel`, the judge plan that `eqarena judge --plan` computes without Prefect).
Steps read and write the warehouse only through `eqarena.warehouse`, and leave numerics to
`eqarena.solvers` and the libraries (`judge`, `importers`, `datasets`, `report`).
"""
