"""`backlog-scaler simulate`: replay a GPU job trace through the real planner, in simulated time.

    trace.py      loaders (Philly, ITP/ElasticFlow, Alibaba openb, generic CSV) -> Trace of Jobs
    workload.py   a Job as pods: whole-node gangs, CPU/memory in proportion to GPUs
    engine.py     the discrete-event simulation: ASGs, nodes, scheduler, state store, reconcile
    report.py     figures (waits, GPU-hours, cost) as JSON and as a table; side-by-side compare
    plot.py       pending/provisioned/busy GPUs over time (matplotlib, imported lazily)
    cli.py        the `simulate` command

Nothing here is imported by the Lambda functions.
"""
