"""The pipelines: each command's sequence of steps (`eqarena.tasks`), as plain Python.

    ingest, import_data, rate, report, analyze_clones, analyze_risk, main_job (run) and refresh

A command runs its pipeline directly, without Prefect, unless a Prefect API is configured
(eqarena/orchestration/steps.py); then it runs the same pipeline as the Prefect flow of
`eqarena.flows`, whose steps become Prefect tasks. Judging always runs as a Prefect flow (its task
runners spread the calls over threads, Dask or Ray).
"""
