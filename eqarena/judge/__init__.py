"""The LLM judge: providers chosen by a spec string (`providers`), templates and verdicts
(`templates`, `verdict`), the plan of missing judge calls (`plan`, `inputs`), the rate-limited async
runner (`runner`), the Batch API mode (`batch`), Dask workers (`dask_calls`), the replay judge
(`replay`) and the checks every run starts with (`setup`). The pipeline's steps are in
`eqarena.tasks.judge`, the pipelines in `eqarena.pipelines.judge`, their flows in `eqarena.flows` (the command table).

Import from the submodules: this package imports nothing itself, so that planning a run (`eqarena
judge --plan`) loads neither the provider SDKs nor Prefect.
"""
