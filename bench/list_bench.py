"""Benchmark of listing a large cluster through `KubernetesCluster` against the fake API server.

20,000 kubectl-like pods (~2.5 KB of JSON each: labels, annotations, ownerReferences, 1-2 containers
with requests/limits, env, volumeMounts, tolerations, nodeSelector, status with conditions) and 4,000
nodes (labels, capacity/allocatable, conditions, addresses, nodeInfo, a short images list).

The fake API server runs in a child process, as the real one is remote: its memory is not ours and
its JSON encoding runs on another core. Prints, best of N runs each:
  - the adapter's time for list_pods() + list_nodes() (HTTP, json.loads, domain parsing),
  - the time of json.loads over the very same page bodies, fetched raw once in this run (baseline),
  - their ratio (target <= 1.5) and the process's peak RSS (target <= 256 MB),
  - where the adapter's time goes: HTTP transfer, json.loads, domain parsing. `--profile` adds the
    top functions of a cProfile run of the adapter.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import multiprocessing
import os
import pstats
import random
import resource
import sys
import time
import uuid
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from shared.adapters.kubernetes.auth import build_transport
from shared.adapters.kubernetes.calls import ApiCaller
from shared.adapters.kubernetes.cluster import ClusterOptions, KubernetesCluster, _peek_continue
from shared.adapters.kubernetes.transport import RestTransport
from shared.formats.kubernetes import nodes_from_list, pods_from_list

PODS = 20_000
NODES = 4_000
TARGET_RATIO = 1.5
TARGET_RSS_MB = 256
TOKEN = "bench-token"
ECR = "123456789012.dkr.ecr.us-west-2.amazonaws.com"
SHAPES = (  # (gpus, cpu, memory) of the main container; 70 % 1 GPU, 20 % 8 GPUs, 10 % 2-4 GPUs
    *[(1, "11", "120Gi")] * 7,
    *[(8, "90", "1000Gi")] * 2,
    (2, "22", "240Gi"),
)
INSTANCE_TYPES = (
    ("p4d.24xlarge", "A100-SXM4-40GB"),
    ("p5.48xlarge", "H100-80GB-HBM3"),
    ("g5.48xlarge", "A10G"),
)


def _ts(rng: random.Random, day: int = 2) -> str:
    return f"2026-12-{day:02d}T{rng.randrange(24):02d}:{rng.randrange(60):02d}:{rng.randrange(60):02d}Z"


def make_pod(i: int, rng: random.Random, node_names: list[str]) -> dict[str, Any]:
    """A kubectl-like batch training pod."""
    job = f"train-{i // 8:05d}"
    team = ("llm", "vision", "speech", "rl", "eval")[i % 5]
    namespace = f"research-{team}"
    job_uid = str(uuid.UUID(int=rng.getrandbits(128)))
    gpus, cpu, memory = SHAPES[i % len(SHAPES)]
    running = i % 10 < 7
    instance_type = INSTANCE_TYPES[i % 3][0]
    started = _ts(rng)
    containers: list[dict[str, Any]] = [
        {
            "name": "main",
            "image": f"{ECR}/research/{team}-trainer:2026.11.{i % 30}",
            "command": ["torchrun"],
            "args": [f"--nproc-per-node={gpus}", "train.py"],
            "env": [
                {"name": "NCCL_DEBUG", "value": "WARN"},
                {"name": "NCCL_SOCKET_IFNAME", "value": "eth0"},
                {
                    "name": "POD_NAME",
                    "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}},
                },
            ],
            "resources": {
                "requests": {
                    "cpu": cpu,
                    "memory": memory,
                    "nvidia.com/gpu": str(gpus),
                    "ephemeral-storage": "50Gi",
                },
                "limits": {"memory": memory, "nvidia.com/gpu": str(gpus)},
            },
            "volumeMounts": [
                {"name": "dshm", "mountPath": "/dev/shm"},
                {"name": "datasets", "mountPath": "/datasets", "readOnly": True},
                {
                    "name": "kube-api-access-7x2kq",
                    "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                    "readOnly": True,
                },
            ],
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File",
            "imagePullPolicy": "IfNotPresent",
        }
    ]
    if i % 4 == 1:
        containers.append(
            {
                "name": "log-shipper",
                "image": f"{ECR}/platform/fluent-bit:3.2.1",
                "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
                "volumeMounts": [{"name": "logs", "mountPath": "/var/log/app"}],
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
                "imagePullPolicy": "IfNotPresent",
            }
        )
    if running:
        conditions = [
            {"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": started}
            for t in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")
        ]
    else:
        conditions = [
            {
                "type": "PodScheduled",
                "status": "False",
                "lastProbeTime": None,
                "lastTransitionTime": started,
                "reason": "Unschedulable",
                "message": f"0/{NODES} nodes are available: {NODES} Insufficient nvidia.com/gpu. preemption: "
                f"0/{NODES} nodes are available: {NODES} No preemption victims found for incoming pod.",
            }
        ]
    status: dict[str, Any] = {
        "phase": "Running" if running else "Pending",
        "conditions": conditions,
        "qosClass": "Burstable",
    }
    spec: dict[str, Any] = {
        "containers": containers,
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "serviceAccountName": "default",
        "serviceAccount": "default",
        "securityContext": {},
        "schedulerName": "default-scheduler",
        "nodeSelector": {"node.kubernetes.io/instance-type": instance_type},
        "tolerations": [
            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
            {
                "key": "node.kubernetes.io/not-ready",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            },
            {
                "key": "node.kubernetes.io/unreachable",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            },
        ],
        "priority": 0,
        "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
    }
    if running:
        spec["nodeName"] = node_names[i % len(node_names)]
        status.update(
            hostIP=f"10.{i % 200}.{i % 250}.{i % 253}",
            podIP=f"10.{100 + i % 100}.{i % 250}.{i % 251}",
            startTime=started,
            containerStatuses=[
                {
                    "name": c["name"],
                    "ready": True,
                    "restartCount": 0,
                    "started": True,
                    "image": c["image"],
                    "containerID": f"containerd://{rng.getrandbits(128):032x}",
                    "state": {"running": {"startedAt": started}},
                }
                for c in containers
            ],
        )
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{job}-worker-{i % 8}-{rng.getrandbits(20):05x}",
            "namespace": namespace,
            "uid": str(uuid.UUID(int=rng.getrandbits(128))),
            "creationTimestamp": _ts(rng),
            "labels": {
                "app.kubernetes.io/name": "trainer",
                "batch.kubernetes.io/controller-uid": job_uid,
                "batch.kubernetes.io/job-name": job,
                "controller-uid": job_uid,
                "job-name": job,
                "team": team,
                "scheduling.x-k8s.io/pod-group": job,
            },
            "annotations": {
                "kubectl.kubernetes.io/default-container": "main",
            },
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": job,
                    "uid": job_uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": spec,
        "status": status,
    }


def make_node(i: int, rng: random.Random) -> dict[str, Any]:
    """A kubectl-like EKS GPU node."""
    instance_type, product = INSTANCE_TYPES[i % 3]
    zone = f"us-west-2{'abc'[i % 3]}"
    name = f"ip-10-{i // 250}-{i % 250}-{i % 7}.us-west-2.compute.internal"
    instance = f"i-0{rng.getrandbits(64):016x}"
    resources = {
        "cpu": "96",
        "ephemeral-storage": "524275692Ki",
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        "memory": "1176519596Ki",
        "nvidia.com/gpu": "8",
        "pods": "737",
        "vpc.amazonaws.com/efa": "4",
    }
    allocatable = {
        **resources,
        "cpu": "95690m",
        "ephemeral-storage": "482098735124",
        "memory": "1167054252Ki",
    }
    heartbeat = _ts(rng)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": str(uuid.UUID(int=rng.getrandbits(128))),
            "creationTimestamp": _ts(rng, 1),
            "labels": {
                "beta.kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/instance-type": instance_type,
                "beta.kubernetes.io/os": "linux",
                "eks.amazonaws.com/capacityType": "ON_DEMAND",
                "eks.amazonaws.com/nodegroup": f"gpu-{instance_type.split('.')[0]}",
                "eks.amazonaws.com/nodegroup-image": "ami-0123456789abcdef0",
                "failure-domain.beta.kubernetes.io/region": "us-west-2",
                "failure-domain.beta.kubernetes.io/zone": zone,
                "k8s.io/cloud-provider-aws": "a94967527effcefb5f5829f529c0a1b9",
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "node.kubernetes.io/instance-type": instance_type,
                "nvidia.com/gpu.product": product,
                "nvidia.com/gpu.count": "8",
                "topology.kubernetes.io/region": "us-west-2",
                "topology.kubernetes.io/zone": zone,
            },
            "annotations": {
                "alpha.kubernetes.io/provided-node-ip": f"10.{i // 250}.{i % 250}.{i % 7}",
                "csi.volume.kubernetes.io/nodeid": json.dumps({"ebs.csi.aws.com": instance}),
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
        },
        "spec": {
            "providerID": f"aws:///{zone}/{instance}",
            "taints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}],
        },
        "status": {
            "capacity": resources,
            "allocatable": allocatable,
            "conditions": [
                {
                    "type": t,
                    "status": "False",
                    "lastHeartbeatTime": heartbeat,
                    "lastTransitionTime": heartbeat,
                    "reason": f"KubeletHasSufficient{t.removesuffix('Pressure')}",
                    "message": f"kubelet has sufficient {t.removesuffix('Pressure').lower()} available",
                }
                for t in ("MemoryPressure", "DiskPressure", "PIDPressure")
            ]
            + [
                {
                    "type": "Ready",
                    "status": "True",
                    "lastHeartbeatTime": heartbeat,
                    "lastTransitionTime": heartbeat,
                    "reason": "KubeletReady",
                    "message": "kubelet is posting ready status",
                }
            ],
            "addresses": [
                {"type": "InternalIP", "address": f"10.{i // 250}.{i % 250}.{i % 7}"},
                {"type": "InternalDNS", "address": name},
                {"type": "Hostname", "address": name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": f"{rng.getrandbits(128):032x}",
                "systemUUID": str(uuid.UUID(int=rng.getrandbits(128))),
                "bootID": str(uuid.UUID(int=rng.getrandbits(128))),
                "kernelVersion": "6.1.112-124.190.amzn2023.x86_64",
                "osImage": "Amazon Linux 2023.6.20241121",
                "containerRuntimeVersion": "containerd://1.7.23",
                "kubeletVersion": "v1.31.2-eks-94953ac",
                "kubeProxyVersion": "v1.31.2-eks-94953ac",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
            "images": [
                {
                    "names": [
                        f"{ECR}/research/{team}-trainer@sha256:{rng.getrandbits(256):064x}",
                        f"{ECR}/research/{team}-trainer:2026.11.{k}",
                    ],
                    "sizeBytes": 12_000_000_000 + k,
                }
                for k, team in enumerate(("llm", "vision", "speech"))
            ]
            + [{"names": [f"{ECR}/platform/fluent-bit:3.2.1"], "sizeBytes": 38_000_000}],
        },
    }


def serve(conn: Connection, pods: int, nodes: int) -> None:
    """Child process: seed a fake API server, send its URL and object sizes, serve until told to stop."""
    from shared.local import kube_api_server

    rng = random.Random(7)
    with kube_api_server.FakeKubeApiServer() as server:
        server.require_token(TOKEN)
        node_objects = [make_node(i, rng) for i in range(nodes)]
        for obj in node_objects:
            server.add_node(obj)
        names = [n["metadata"]["name"] for n in node_objects]
        sizes = []
        for i in range(pods):
            obj = make_pod(i, rng, names)
            if i < 1000:
                sizes.append(len(json.dumps(obj, separators=(",", ":"))))
            server.add_pod(obj)
        node_size = len(json.dumps(node_objects[0], separators=(",", ":")))
        conn.send((server.url, sum(sizes) / len(sizes), node_size))
        conn.recv()  # any message: stop


CPU_SECONDS: dict[str, float] = {}  # best CPU time of this process (all threads) per measured name


def best_of(runs: int, fn: Callable[[], Any], name: str = "") -> tuple[float, Any]:
    """Best wall time of `runs` calls and the last result; the best CPU time goes to CPU_SECONDS[name]."""
    best, best_cpu, result = float("inf"), float("inf"), None
    for _ in range(runs):
        result = None  # let the previous result go before the next run
        started, started_cpu = time.perf_counter(), time.process_time()
        result = fn()
        best = min(best, time.perf_counter() - started)
        best_cpu = min(best_cpu, time.process_time() - started_cpu)
    CPU_SECONDS[name] = best_cpu
    return best, result


def fetch_pages(api: RestTransport, options: ClusterOptions) -> tuple[list[bytes], list[bytes]]:
    """The adapter's requests (`ApiCaller.send`), one after the other, bodies kept raw (the token
    peeked, not decoded)."""
    caller = ApiCaller(api, options)

    def pages(path: str, field_selector: str | None = None) -> list[bytes]:
        bodies: list[bytes] = []
        token = None
        while True:
            query = (("limit", options.page_size), ("continue", token), ("fieldSelector", field_selector))
            body = caller.send("GET", path, query=query).data
            bodies.append(body)
            token = _peek_continue(body)
            if token is None and b'"continue"' in body[:16384]:  # unsure: decode (not on the fake)
                token = json.loads(body)["metadata"].get("continue")
            if not token:
                return bodies

    return (
        pages("/api/v1/pods", options.pod_field_selector),
        pages("/api/v1/nodes"),
    )


def loads_each(bodies: list[bytes]) -> int:
    """json.loads of every body, each result dropped before the next: the decoding cost alone."""
    items = 0
    for body in bodies:
        items += len(json.loads(body)["items"])
    return items


def without_gc(fn: Callable[[], Any]) -> Callable[[], Any]:
    def run() -> Any:
        gc.disable()
        try:
            return fn()
        finally:
            gc.enable()

    return run


def time_parsing(runs: int, pod_pages: list[bytes], node_pages: list[bytes]) -> float:
    """Best time of the domain parsers over the decoded pages (decoding not timed)."""
    pod_docs = [json.loads(body) for body in pod_pages]
    node_docs = [json.loads(body) for body in node_pages]
    seconds, _ = best_of(
        runs,
        without_gc(lambda: ([pods_from_list(d) for d in pod_docs], [nodes_from_list(d) for d in node_docs])),
        "parse",
    )
    return seconds


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=PODS)
    parser.add_argument("--nodes", type=int, default=NODES)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--page-size", type=int, default=500)
    parser.add_argument(
        "--profile", action="store_true", help="cProfile one adapter run and print the top 25"
    )
    args = parser.parse_args()

    rss_start = rss_mb()
    context = multiprocessing.get_context("fork")  # the child builds the data; ours stays small
    ours, theirs = context.Pipe()
    child = context.Process(target=serve, args=(theirs, args.pods, args.nodes), daemon=True)
    child.start()
    url, pod_bytes, node_bytes = ours.recv()
    try:
        api = build_transport(url, token=TOKEN)
        options = ClusterOptions(page_size=args.page_size)

        def cold() -> tuple[int, int]:
            fresh = KubernetesCluster(api, options)  # knows no object yet: parses every one
            return len(fresh.list_pods()), len(fresh.list_nodes())

        cold_s, seen = best_of(args.runs, cold, "cold")
        assert seen == (args.pods, args.nodes), seen

        warm_cluster = KubernetesCluster(api, options)
        warm_cluster.list_pods(), warm_cluster.list_nodes()  # a previous reconcile run

        def warm() -> tuple[int, int]:  # objects unchanged since the previous run are reused
            return len(warm_cluster.list_pods()), len(warm_cluster.list_nodes())

        warm_s, seen = best_of(args.runs, warm, "warm")
        assert seen == (args.pods, args.nodes), seen
        rss_adapter = rss_mb()

        fetch_s, (pod_pages, node_pages) = best_of(args.runs, lambda: fetch_pages(api, options), "fetch")
        bodies = pod_pages + node_pages
        loads_s, _ = best_of(args.runs, without_gc(lambda: loads_each(bodies)), "loads")
        loads_gc_s, _ = best_of(args.runs, lambda: loads_each(bodies))
        parse_s = time_parsing(args.runs, pod_pages, node_pages)
        total_mb = sum(len(b) for b in bodies) / 2**20

        server = "objects encoded once per resourceVersion, like kube-apiserver's watch cache"
        print(
            f"cluster: {args.pods:,} pods (~{pod_bytes / 1024:.1f} KB each), {args.nodes:,} nodes "
            f"(~{node_bytes / 1024:.1f} KB each); {len(pod_pages)} + {len(node_pages)} pages of "
            f"{args.page_size}, {total_mb:.1f} MB of JSON; fake server in a child process ({server}); "
            f"best of {args.runs}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
        )
        print(f"json.loads of the same bodies (baseline, collector paused) : {loads_s * 1000:6.0f} ms")
        for label, seconds, name in (
            ("adapter list_pods + list_nodes, cold (every object parsed)", cold_s, "cold"),
            ("adapter list_pods + list_nodes, warm (unchanged reused)   ", warm_s, "warm"),
        ):
            ratio = seconds / loads_s
            cpu_ratio = CPU_SECONDS[name] / CPU_SECONDS["loads"]
            verdict = "OK" if ratio <= TARGET_RATIO else "MISSED"
            print(
                f"{label} : {seconds * 1000:6.0f} ms  ratio {ratio:4.2f} (target <= {TARGET_RATIO}: "
                f"{verdict}); in CPU time of this process {cpu_ratio:4.2f}"
            )
        verdict = "OK" if rss_adapter <= TARGET_RSS_MB else "MISSED"
        print(
            f"peak RSS after the adapter runs : {rss_adapter:.0f} MB "
            f"(target <= {TARGET_RSS_MB} MB: {verdict}); "
            f"interpreter + imports {rss_start:.0f} MB; after the baseline, which holds every body, "
            f"{rss_mb():.0f} MB"
        )
        print("where a cold list's time goes (each part alone; the adapter overlaps HTTP with the rest):")
        print(
            f"  HTTP: request, fake server, transfer : {fetch_s * 1000:6.0f} ms  "
            f"(CPU in this process: {CPU_SECONDS['fetch'] * 1000:.0f} ms)"
        )
        print(
            f"  json.loads                           : {loads_s * 1000:6.0f} ms  "
            f"({loads_gc_s * 1000:.0f} ms with the cyclic collector running)"
        )
        print(
            f"  domain parsing (shared.formats)      : {parse_s * 1000:6.0f} ms  "
            f"(CPU: {CPU_SECONDS['parse'] * 1000:.0f} ms)"
        )
        if args.profile:
            profiler = cProfile.Profile()
            profiler.runcall(cold)  # the main thread only: the page fetching thread is not seen
            pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
    finally:
        ours.send("stop")
        child.join(timeout=10)


if __name__ == "__main__":
    main()
