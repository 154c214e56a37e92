"""Prefect flows: the pipelines of `eqarena.pipelines` as flows, and the judge flows.

    ingest, import, rate, analyze-clones, analyze-risk, report, run (the main job) and refresh (the
    main job, incrementally) each wrap their pipeline; judge and judge-adaptive are flows only.

Commands run the pipelines directly unless a Prefect API is configured (eqarena/orchestration/steps.py);
`eqarena serve` and prefect.yaml deployments run these flows.

Every flow takes one options dataclass (`eqarena.options`) and the warehouse path, and records itself
in the `runs` table. Flow modules keep their annotations real (no `from __future__ import
annotations`): Prefect builds each flow's parameter schema from them, and a deployment validates
its parameters against that schema.
"""
