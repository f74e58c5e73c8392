"""`make demo` / `python -m shared.local.demo`: the whole scaler running locally, in accelerated time.

The real Lambda handlers (reconcile, webhook, aws_events) are invoked like Lambda invokes them,
against a moto server (Auto Scaling, EC2, DynamoDB, SQS, SNS, Secrets Manager) and the fake
Kubernetes API server, while a simulated world boots instances into nodes, schedules and runs a
synthetic GPU workload, and refuses launches of the cheaper group (an EC2 capacity shortage).

    scenario.py       the embedded config, world timings and workload (default and quick)
    aws.py            the moto server, the deployed resources, the capacity shortage
    world.py          kubelets, scheduler, jobs, launch failures (what AWS and the cluster do)
    lambda_events.py  the events Lambda receives (schedule, SQS batch, HTTP v2, EventBridge)
    functions.py      the handlers, wired like in Lambda with the demo's clock
    driver.py         the run: set-up, the step loop, pacing
    timeline.py       the printed timeline and progress line
    report.py         figures, summary, plot
    cli.py            the command line

Nothing here is imported by the Lambda functions (shared.local is left out of their asset).
"""
