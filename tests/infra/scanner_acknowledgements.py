"""Every checkov and parliament finding on the synthesized template that we accept, with why.

One list: a check id here is accepted on every resource it fires on; anything else fails
tests/infra/test_scanners.py. Fix the template before adding a line; an entry must say why the finding
does not apply or what covers the risk instead.
"""

from __future__ import annotations

CHECKOV: dict[str, str] = {
    "CKV_AWS_27": (
        "The queues use SQS-managed server-side encryption (SqsManagedSseEnabled); the check only "
        "recognises a KMS key. Their messages are wake-ups and failed AWS events, no secrets."
    ),
    "CKV_AWS_119": (
        "The state table is encrypted at rest with the AWS-managed key; it holds leases, backoff and "
        "drain intents, no secrets, and only the scaler's roles may read it (IAM)."
    ),
    "CKV_AWS_149": (
        "The webhook secret is encrypted with the aws/secretsmanager key; only the webhook role may "
        "read it (its IAM policy); a customer key would add a key policy and cost, no protection here."
    ),
    "CKV_AWS_158": (
        "CloudWatch Logs encrypts every log group at rest; the functions log no secrets or bodies, so "
        "a customer key (and its key policy for the logs service) buys nothing."
    ),
    "CKV_AWS_116": (
        "No function needs a Lambda DeadLetterConfig: reconcile's scheduled ticks are not retried on "
        "purpose and its SQS trigger has the queue's own DLQ; webhook and force_scale_down are invoked "
        "synchronously (the caller sees the error); aws_events has an on-failure destination "
        "(EventInvokeConfig, the failed-invocations queue, alarmed), which the check does not read."
    ),
    "CKV_AWS_117": (
        "VPC placement is a deployment choice (deployment.vpc_id; tests/infra/test_vpc_placement.py "
        "covers it): by default the functions reach the public EKS endpoint and AWS APIs directly."
    ),
    "CKV_AWS_115": (
        "Reconcile has reserved concurrency 1 (one writer). The others are bounded by their callers "
        "(EventBridge, SQS-fed FIFO triggers, operators); reserving concurrency would take it from "
        "the account's pool without limiting anything that matters."
    ),
    "CKV_AWS_173": (
        "The environment holds no secrets (names, ARNs, the scaler config); Lambda encrypts it at rest "
        "with its service key. Secrets are read from Secrets Manager at run time."
    ),
}

# Keyed `<issue>@<resource type of the document>`: an issue is accepted only in that kind of policy.
PARLIAMENT: dict[str, str] = {
    "RESOURCE_STAR@AWS::KMS::Key": (
        "In a key policy Resource '*' means this key and nothing else (AWS requires it). The account "
        "root statement is CDK's default that keeps the key manageable; the CloudWatch statement "
        "allows only kms:Decrypt and kms:GenerateDataKey, to publish alarms to the encrypted topic."
    ),
}
