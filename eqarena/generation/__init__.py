"""Answers of a model to a dataset's prompts (`eqarena generate`), for the judge to compare: the plan of
the prompts still unanswered (`plan`), the checks every run starts with (`setup`) and the rate-limited
runner that stores each answer as it arrives (`runner`), or Batch API jobs (`batch`, on the judge's
plumbing in eqarena/llm/batch_api.py). Providers, limits, retries and caps are the
judge's (eqarena/llm/providers.py, eqarena/llm/calls.py). The pipeline's steps are in
`eqarena.tasks.generate`, its flow in `eqarena.flows` (the command table).

Import from the submodules: this package imports nothing itself, so that planning a run (`eqarena
generate --plan`) loads neither the provider SDKs nor Prefect.
"""
