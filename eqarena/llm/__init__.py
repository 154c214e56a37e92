"""The LLM client layer the judge and generation share: providers behind one interface, the shared request
run (concurrency, rate limits, retries, stop signals), pricing, budgets and the Batch API plumbing."""
