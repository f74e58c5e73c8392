"""Wake-up latency and cold-start import cost of the functions. Prints figures; not a test.

Latency: in one process, moto (`mock_aws`) and the fake Kubernetes API server (real HTTP): a signed
AdmissionReview goes through the real webhook handler onto the SQS FIFO queue, the message is received
and handed to the real reconcile handler (as the Lambda event source would), and the clock stops when
the reconcile calls SetDesiredCapacity. 200 pending GPU pods, 50 busy GPU nodes. The queue's delivery
delay (deployment.webhook_queue_delay_seconds, there so the scheduler marks the pod first) is set to 0:
this measures our processing, not the deliberate wait. The reconcile reaches the fake API server as a
deployed function reaches EKS: the config's endpoint and CA, a token presigned by STS (the fake server
checks its form). p50/p99 over the warm runs; the first run (which builds the controller) is shown
apart. Target: p99 <= 2 s.

Cold start: each handler module imported in a fresh interpreter (median of N rounds, each round
importing every line in turn), with the environment the CDK app gives that function
(cdk/environment.py: the webhook has the cluster name, not the config), from the function package as
the CDK app builds it (cdk/packaging.py: shared/ and functions/ with their byte code, here compiled
by this interpreter), against a bare `import kubernetes.client, boto3` measured in the same run from
the installed packages' byte code. Target: ratio <= 1.3. The X-Ray SDK that Powertools' Tracer loads
is shown on its own line (it builds a botocore client at import). A reference line shows the floor
of the scaling functions: the libraries they import (boto3, urllib3, pydantic, Powertools' Logger
and Metrics; not the kubernetes package: the adapter makes its requests with urllib3 itself, see
shared/adapters/kubernetes/transport.py) and the config's models, before any of the scaler's own
logic. Two more show
what a package without byte code costs (Lambda cannot write `__pycache__`, so it compiles every
module it imports at every cold start): the baseline and the reconcile handler with only the
standard library compiled, as the runtime has it.
"""

from __future__ import annotations

import argparse
import base64
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

REGION = "us-west-2"
CLUSTER = "bench"
SECRET = "bench-webhook-secret-0123456789abcdef"
BUSY_ASG, GPU_ASG = "bench-busy", "bench-gpu"
SHAPE = {"cpu": "95", "memory": "1100Gi", "nvidia.com/gpu": "8", "pods": "110"}
# Any PEM will do: the fake API server speaks plain HTTP, so the CA is never used to verify anything.
CA_PEM = b"-----BEGIN CERTIFICATE-----\nMIIBbench\n-----END CERTIFICATE-----\n"


def _environment() -> None:
    os.environ.update(
        {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_SESSION_TOKEN": "testing",
            "AWS_DEFAULT_REGION": REGION,
            "POWERTOOLS_TRACE_DISABLED": "1",
            "POWERTOOLS_LOG_LEVEL": "WARNING",
            "POWERTOOLS_METRICS_DISABLED": "1",
        }
    )


def _config() -> dict[str, Any]:
    return {
        "cluster_name": CLUSTER,
        "region": REGION,
        "node_groups": [
            {
                "name": "busy",
                "asg_name": BUSY_ASG,
                "allocatable": SHAPE,
                "labels": {"gpu": "busy"},
                "max_size": 64,
            },
            {
                "name": "gpu",
                "asg_name": GPU_ASG,
                "allocatable": SHAPE,
                "labels": {"gpu": "a100"},
                "max_size": 400,
            },
        ],
    }


def _is_eks_token(header: str) -> bool:
    """What EKS would accept, as far as a fake server can tell: a presigned sts:GetCallerIdentity
    URL signing the `x-k8s-aws-id` header, base64url-encoded behind `k8s-aws-v1.`."""
    from shared.adapters.kubernetes.auth import CLUSTER_ID_HEADER, TOKEN_PREFIX

    prefix = "Bearer " + TOKEN_PREFIX
    if not header.startswith(prefix):
        return False
    encoded = header.removeprefix(prefix)
    url = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode()
    query = parse_qs(urlsplit(url).query)
    signed = query.get("X-Amz-SignedHeaders", [""])[0].split(";")
    return query.get("Action") == ["GetCallerIdentity"] and CLUSTER_ID_HEADER in signed


def _admission_event(body: str, headers: dict[str, str]) -> dict[str, Any]:
    """A Lambda Function URL (payload v2) request, as tests/events/webhook_function_url_admission.json."""
    template = json.loads((ROOT / "tests" / "events" / "webhook_function_url_admission.json").read_text())
    template["headers"] = {**template["headers"], **headers, "content-length": str(len(body))}
    template["body"] = body
    return template


def _sqs_event(message: dict[str, Any]) -> dict[str, Any]:
    return {
        "Records": [
            {
                "messageId": message["MessageId"],
                "receiptHandle": message["ReceiptHandle"],
                "body": message["Body"],
                "attributes": message.get("Attributes", {}),
                "messageAttributes": {},
                "md5OfBody": message["MD5OfBody"],
                "eventSource": "aws:sqs",
                "eventSourceARN": f"arn:aws:sqs:{REGION}:123456789012:{CLUSTER}-triggers.fifo",
                "awsRegion": REGION,
            }
        ]
    }


def wake_up_latency(runs: int, pending: int, busy_nodes: int) -> tuple[float, list[float]]:
    """Seconds from the signed webhook request to SetDesiredCapacity: (first run, warm runs)."""
    _environment()
    import boto3
    from moto import mock_aws

    from shared.adapters.aws import clients
    from shared.adapters.aws.state_store import create_table
    from shared.adapters.kubernetes.rbac import status_config_map
    from shared.constants import DEFAULT_STATUS_NAMESPACE, TAG_CLUSTER
    from shared.local.kube_api_server import FakeKubeApiServer
    from tests.builders import node, pod
    from tests.fakes.memory import FakeLambdaContext

    with mock_aws(), FakeKubeApiServer() as server:
        server.require_token(_is_eks_token)  # the functions' own path: an EKS token, signed by STS
        server.add_config_map(status_config_map(DEFAULT_STATUS_NAMESPACE))  # the RBAC manifest creates it
        create_table(boto3.client("dynamodb", region_name=REGION), "bench-state")
        secret_arn = boto3.client("secretsmanager", region_name=REGION).create_secret(
            Name="bench-webhook", SecretString=SECRET
        )["ARN"]
        sqs = boto3.client("sqs", region_name=REGION)
        queue_url = sqs.create_queue(
            QueueName=f"{CLUSTER}-triggers.fifo", Attributes={"FifoQueue": "true", "DelaySeconds": "0"}
        )["QueueUrl"]
        boto3.client("ec2", region_name=REGION).create_launch_template(
            LaunchTemplateName="gpu",
            LaunchTemplateData={"ImageId": "ami-12c6146b", "InstanceType": "p4d.24xlarge"},
        )
        autoscaling = boto3.client("autoscaling", region_name=REGION)
        for name, desired in ((BUSY_ASG, busy_nodes), (GPU_ASG, 0)):
            autoscaling.create_auto_scaling_group(
                AutoScalingGroupName=name,
                MinSize=0,
                MaxSize=400,
                DesiredCapacity=desired,
                LaunchTemplate={"LaunchTemplateName": "gpu"},
                AvailabilityZones=[f"{REGION}a"],
                # the cluster's tag, as every group the scaler changes carries (docs/deploy.md)
                Tags=[{"Key": TAG_CLUSTER, "Value": CLUSTER, "PropagateAtLaunch": False}],
            )
        group = autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[BUSY_ASG])[
            "AutoScalingGroups"
        ][0]
        for index, instance in enumerate(group["Instances"]):
            server.add_node(node(f"busy-{index}", instance["InstanceId"], labels={"gpu": "busy"}, taints=[]))
            server.add_pod(pod(f"running-{index}", gpus=8, node=f"busy-{index}", tolerations=[]))
        sizes = itertools.cycle((1, 1, 1, 2, 4, 8, 1, 8))
        for index in range(pending):
            server.add_pod(
                pod(f"pending-{index}", gpus=next(sizes), node_selector={"gpu": "a100"}, tolerations=[])
            )
        # The cluster as the deployed functions reach it (endpoint + CA + EKS token), not a kubeconfig:
        # reading one imports the kubernetes package, which the functions never load.
        endpoint = {"endpoint": server.url, "certificate_authority": base64.b64encode(CA_PEM).decode()}
        os.environ.update(
            {
                "SCALER_CONFIG": json.dumps({**_config(), "kubernetes": endpoint}),
                "SCALER_TABLE_NAME": "bench-state",
                "SCALER_QUEUE_URL": queue_url,
                "SCALER_WEBHOOK_SECRET_ARN": secret_arn,
            }
        )
        clients.clear_clients()
        from functions.reconcile import handler as reconcile
        from functions.webhook import handler as webhook
        from functions.webhook.auth import sign
        from functions.webhook.service import build_webhook
        from functions.webhook.settings import load_settings

        # Each run lands in its own 5 s deduplication window, as separate pod bursts would.
        offset = [0.0]

        def webhook_clock() -> float:
            return time.time() + offset[0]

        webhook.set_dependencies(build_webhook(load_settings(os.environ), clock=webhook_clock))
        # The AdmissionReview of an 8-GPU training pod, as the API server sends it.
        body = json.loads((ROOT / "tests" / "events" / "webhook_function_url_admission.json").read_text())[
            "body"
        ]
        stops: list[float] = []
        clients.client("autoscaling", REGION).meta.events.register(
            "before-call.auto-scaling.SetDesiredCapacity", lambda **_: stops.append(time.perf_counter())
        )
        context: Any = FakeLambdaContext()
        latencies: list[float] = []
        for run in range(runs + 1):
            offset[0] = run * 6.0
            stops.clear()
            start = time.perf_counter()
            response = webhook.handler(
                _admission_event(body, sign(SECRET, int(webhook_clock()), body)), context
            )
            if response["statusCode"] != 200:
                raise RuntimeError(f"webhook refused the request: {response}")
            messages = sqs.receive_message(
                QueueUrl=queue_url, MaxNumberOfMessages=10, AttributeNames=["All"]
            ).get("Messages", [])
            if not messages:
                raise RuntimeError("the webhook enqueued nothing")
            batch = reconcile.handler(_sqs_event(messages[0]), context)
            if batch["batchItemFailures"] or not stops:
                raise RuntimeError(f"the reconcile did not set desired capacity: {batch}")
            latencies.append(stops[0] - start)
            for message in messages:
                sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
            autoscaling.set_desired_capacity(AutoScalingGroupName=GPU_ASG, DesiredCapacity=0)
        return latencies[0], latencies[1:]


def import_seconds(statement: str, env: dict[str, str]) -> float:
    """Wall time of `statement` (imports) in a fresh interpreter, run in the directory of the code it
    imports (PYTHONPATH)."""
    code = f"import time; t = time.perf_counter(); {statement}; print(time.perf_counter() - t)"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=env["PYTHONPATH"],
        env=env,
    )
    return float(out.stdout.strip().splitlines()[-1])


def median_import_seconds(
    statements: list[tuple[str, str, dict[str, str]]], repeats: int
) -> list[tuple[str, float]]:
    """Median of each statement's import time, the statements taken in turn in every round, so that
    a change of the machine's speed during the run moves a handler and its baseline alike."""
    samples: dict[str, list[float]] = {label: [] for label, _, _ in statements}
    for _ in range(repeats):
        for label, statement, env in statements:
            samples[label].append(import_seconds(statement, env))
    return [(label, statistics.median(values)) for label, values in samples.items()]


def _deployed_environments(tracing: bool) -> dict[str, dict[str, str]]:
    """Each function's environment as the CDK app sets it (cdk/environment.py), with placeholder
    ARNs: the webhook gets the cluster name, the scaling functions the config's SSM parameter, which
    they read at first use, not at import."""
    from cdk.environment import function_environments
    from shared.config import parse_config

    config = parse_config({**_config(), "deployment": {"tracing": tracing}})
    account = f"{REGION}:123456789012"
    return function_environments(
        config,
        table_name=f"{CLUSTER}-state",
        queue_url=f"https://sqs.{REGION}.amazonaws.com/123456789012/{CLUSTER}-triggers.fifo",
        topic_arn=f"arn:aws:sns:{account}:{CLUSTER}-notifications",
        webhook_secret_arn=f"arn:aws:secretsmanager:{account}:secret:webhook",
        slack_secret_arn=None,
        config_parameter={"SCALER_CONFIG_PARAMETER": f"/{CLUSTER}/config", "SCALER_CONFIG_VERSION": "1"},
    )


def _function_package(output: Path) -> Path:
    """The function package as the CDK app deploys it, compiled by this interpreter."""
    from cdk.packaging import build_function_package

    build_function_package(ROOT, output, interpreter=sys.executable)
    return output


STDLIB_BYTECODE = """
import importlib.util, py_compile, sys, sysconfig
import functions.reconcile.handler, kubernetes.client, boto3
stdlib = sysconfig.get_paths()["stdlib"]
for module in list(sys.modules.values()):
    source = getattr(module, "__file__", None) or ""
    if source.startswith(stdlib) and source.endswith(".py") and "site-packages" not in source:
        py_compile.compile(source, cfile=importlib.util.cache_from_source(source), doraise=True)
"""


def _stdlib_only_cache(cache: Path, env: dict[str, str], package: Path) -> dict[str, str]:
    """The environment of an import that reads byte code from `cache`, which holds that of the
    standard library modules the handlers import and nothing else."""
    uncompiled = {"PYTHONPYCACHEPREFIX": str(cache), "PYTHONDONTWRITEBYTECODE": "1"}
    subprocess.run(
        [sys.executable, "-c", STDLIB_BYTECODE],
        check=True,
        cwd=package,
        env={**env, **uncompiled, "PYTHONPATH": str(package)},
        capture_output=True,
    )
    return uncompiled


def import_report(repeats: int) -> list[tuple[str, float]]:
    deployed = _deployed_environments(tracing=False)  # as deployed by default: no X-Ray SDK
    traced = _deployed_environments(tracing=True)
    with tempfile.TemporaryDirectory(prefix="latency-bench-") as tmp:
        package = _function_package(Path(tmp, "package"))
        base = {**os.environ, "AWS_DEFAULT_REGION": REGION}
        base.pop("PYTHONPYCACHEPREFIX", None)
        # Python looks for byte code in a cache prefix only: one holding the standard library's
        # alone leaves the dependencies and the package to compile, as in a Lambda package without
        # byte code (the runtime's own standard library has its byte code).
        uncompiled = _stdlib_only_cache(Path(tmp, "stdlib-only"), {**base, **deployed["reconcile"]}, package)

        def env_of(*extra: dict[str, str]) -> dict[str, str]:
            return {**base, **{k: v for e in extra for k, v in e.items()}, "PYTHONPATH": str(package)}

        def env(function: str, environments: dict[str, dict[str, str]] = deployed) -> dict[str, str]:
            return env_of(environments[function])

        statements = [
            ("baseline: import kubernetes.client, boto3", "import kubernetes.client, boto3", env_of()),
            *(
                (f"functions.{name}.handler", f"import functions.{name}.handler", env(name))
                for name in ("reconcile", "aws_events", "force_scale_down", "webhook")
            ),
            (
                "(with deployment.tracing: reconcile)",
                "import functions.reconcile.handler",
                env("reconcile", traced),
            ),
            # What the scaling functions import before any of the scaler's own logic: the fixed
            # dependencies and the config's models. Their handlers cannot import in less.
            (
                "(libraries + config models: reconcile's floor)",
                "import boto3, urllib3, pydantic, shared.config; "
                "from aws_lambda_powertools import Logger, Metrics",
                env("reconcile"),
            ),
            ("(no byte code: baseline)", "import kubernetes.client, boto3", env_of(uncompiled)),
            (
                "(no byte code: reconcile)",
                "import functions.reconcile.handler",
                env_of(deployed["reconcile"], uncompiled),
            ),
        ]
        return median_import_seconds(statements, repeats)


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))
    return ordered[index]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--pending", type=int, default=200)
    parser.add_argument("--nodes", type=int, default=50)
    parser.add_argument("--import-repeats", type=int, default=5)
    args = parser.parse_args()

    imports = import_report(args.import_repeats)
    baselines = {label: seconds for label, seconds in imports if "baseline" in label}
    print("cold-start import time (fresh interpreter, median):")
    for label, seconds in imports:
        ratio = ""
        if "baseline" not in label:  # each against the baseline compiled like it
            reference = "(no byte code: baseline)" if "no byte code" in label else imports[0][0]
            target = "" if label.startswith("(") else " (target <= 1.3)"
            ratio = f"  ratio {seconds / baselines[reference]:.2f}{target}"
        print(f"  {label:44s} {seconds * 1000:8.1f} ms{ratio}", flush=True)
    # Printed before the latency runs, which need moto and the fake API server: a failure there
    # does not hide the import figures.
    first, warm = wake_up_latency(args.runs, args.pending, args.nodes)
    p50, p99 = statistics.median(warm), percentile(warm, 0.99)
    print(f"wake-up latency: webhook -> SetDesiredCapacity, {args.pending} pending pods, {args.nodes} nodes")
    print(f"  first run (builds the controller): {first * 1000:8.1f} ms")
    print(
        f"  warm runs: {len(warm)}  p50 {p50 * 1000:7.1f} ms  p99 {p99 * 1000:7.1f} ms  (target <= 2000 ms)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
