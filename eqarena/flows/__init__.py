"""Prefect flows: the pipeline's runs, each composing the steps of `eqarena.tasks`.

    ingest, import, judge, judge-adaptive, rate, analyze-clones, analyze-risk, report,
    run (the main job) and refresh (the main job, incrementally)

Every flow takes one options dataclass (`eqarena.options`) and the warehouse path, and records itself
in the `runs` table. Flow modules keep their annotations real (no `from __future__ import
annotations`): Prefect builds each flow's parameter schema from them, and a deployment validates
its parameters against that schema.
"""
