"""The pipelines: each command's sequence of steps (`eqarena.tasks`), as plain Python.

    ingest, import_data, generate, judge, judge_adaptive, rate, report, analyze_clones, analyze_risk,
    main_job (run) and refresh

A command runs its pipeline directly, without Prefect, unless a Prefect API is configured
(eqarena/orchestration/steps.py); then it runs the same pipeline as its Prefect flow, built from its
row of the command table (eqarena/flows.py), whose steps become Prefect tasks.
"""
