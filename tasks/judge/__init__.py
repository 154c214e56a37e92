"""The LLM judge: providers chosen by a spec string (`providers`), templates and verdicts
(`templates`, `verdict`), the plan of missing judge calls (`plan`, `inputs`), the rate-limited async
runner (`runner`) and the Batch API mode (`batch`). The Prefect tasks are in `tasks.judge.steps`, the
flow in `flows.judge`.

Import from the submodules: this package imports nothing itself, so that planning a run (`eqarena
judge --plan`) loads neither the provider SDKs nor Prefect.
"""
