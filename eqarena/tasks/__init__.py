"""The pipeline's steps, which the flows of `eqarena.flows` compose.

A "task" here is one step of a flow: most are Prefect tasks (`@task`, shown as task runs in the
Prefect UI); the rest are the plain functions and small classes those steps share (run bookkeeping
in `runs`, the judge session, the process pool of `parallel`, the judge plan that `eqarena judge
--plan` computes without Prefect). Steps read and write the warehouse only through
`eqarena.warehouse`, and leave numerics to `eqarena.solvers` and the libraries (`judge`,
`importers`, `datasets`, `report`).
"""
