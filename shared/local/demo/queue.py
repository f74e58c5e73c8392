"""A Kueue-like queue in the demo: capacity first, through a ProvisioningRequest, then the pods.

Kueue's ProvisioningRequest admission check (kueue pkg/controller/admissionchecks/provisioning)
creates one PodTemplate per pod set and a ProvisioningRequest naming them, waits for the autoscaler's
answer, and only then creates the workload's pods, annotated with the request they consume
(`autoscaling.x-k8s.io/consume-provisioning-request`, and cluster-autoscaler's older key). Here:

- at the job's submit time the queue creates the PodTemplate and the ProvisioningRequest (its
  creation goes to the webhook as an AdmissionReview, as the manifest's rule sends it);
- every step it reads the request: Provisioned=True creates the job's pods (each admitted through the
  webhook like any pod); Failed=True rejects the workload, as Kueue does without a retry policy;
  Provisioned=False leaves the workload pending (Kueue's admission check stays Pending while the
  autoscaler tries again; cluster-autoscaler gives up on such a request only when it expires after a
  week), and the queue goes on reading the request.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Protocol

from shared.constants import PROVISIONING_API_GROUP
from shared.domain.provisioning import (
    ANNOTATION_CONSUME_REQUEST,
    ANNOTATION_CONSUME_REQUEST_LEGACY,
    FAILED,
    PROVISIONED,
    PROVISIONING_API_VERSION,
)
from shared.local.demo.scenario import DemoRequest
from shared.local.demo.world import NAMESPACE, StepReport, World, timestamp

Json = dict[str, Any]


class QueueKube(Protocol):
    """What the queue uses of the fake API server (its seeding API)."""

    def add_pod_template(self, obj: Json) -> Json: ...

    def add_provisioning_request(self, obj: Json) -> Json: ...

    def get_provisioning_request(self, namespace: str, name: str) -> Json | None: ...


@dataclass
class QueuedJob:
    request: DemoRequest
    # queued -> waiting (request created) -> admitted | rejected, or pending (answered Provisioned=False:
    # still followed, and admitted or rejected if a later answer says so)
    state: str = "queued"
    answer: str = ""  # the condition that decided it, as `Type=Status (Reason): message`
    answered_at: datetime | None = None


def _condition(obj: Json, type_: str, status: str = "True") -> Json | None:
    for condition in (obj.get("status") or {}).get("conditions") or ():
        if condition.get("type") == type_ and condition.get("status") == status:
            return dict(condition)
    return None


class DemoQueue:
    """Admits the scenario's requested jobs through ProvisioningRequests; `step(now)` each world step."""

    def __init__(
        self, kube: QueueKube, world: World, admit: Callable[[Json], bool], requests: tuple[DemoRequest, ...]
    ) -> None:
        self._kube = kube
        self._world = world
        self._admit = admit
        self.jobs = [QueuedJob(r) for r in sorted(requests, key=lambda r: (r.job.submit, r.name))]
        self._start: datetime | None = None

    def step(self, now: datetime, report: StepReport) -> None:
        """Create the requests that are due; admit or reject those the scaler answered."""
        if self._start is None:
            self._start = now
        for queued in self.jobs:
            if queued.state == "queued" and self._start + timedelta(seconds=queued.request.job.submit) <= now:
                self._create(queued, now, report)
            elif queued.state in ("waiting", "pending"):
                self._follow(queued, now, report)

    def done(self) -> bool:
        """Every request was answered for good: its job admitted or rejected, or left pending by a
        Provisioned=False when the scenario expects that (the demo does not wait out the request's
        week before it expires); one pending against its expectation may yet be provisioned."""
        return all(
            q.state in ("admitted", "rejected") or (q.state == "pending" and q.request.expected == "pending")
            for q in self.jobs
        )

    def _create(self, queued: QueuedJob, now: datetime, report: StepReport) -> None:
        request, job = queued.request, queued.request.job
        template = f"{request.name}-main"
        self._kube.add_pod_template(self._world.pod_template(job, template, now))
        created = self._kube.add_provisioning_request(
            {
                "apiVersion": f"{PROVISIONING_API_GROUP}/{PROVISIONING_API_VERSION}",
                "kind": "ProvisioningRequest",
                "metadata": {
                    "name": request.name,
                    "namespace": NAMESPACE,
                    "creationTimestamp": timestamp(now),
                },
                "spec": {
                    "provisioningClassName": request.class_name,
                    "podSets": [{"podTemplateRef": {"name": template}, "count": job.pods}],
                },
            }
        )
        allowed = self._admit(created)
        queued.state = "waiting"
        report.add(
            now,
            "kueue",
            f"ProvisioningRequest {NAMESPACE}/{request.name}: {job.pods} x {job.gpus} GPUs "
            f"({request.class_name}); webhook {'allowed' if allowed else 'refused'} it",
        )

    def _wait(self, queued: QueuedJob, not_yet: Json | None, now: datetime, report: StepReport) -> None:
        """A Provisioned=False answer: the workload stays pending; said once per new answer."""
        if not_yet is None:
            return
        answer = f"Provisioned=False ({not_yet.get('reason')}): {not_yet.get('message')}"
        if answer != queued.answer:
            queued.state, queued.answer, queued.answered_at = "pending", answer, now
            report.add(now, "kueue", f"{queued.request.name} stays pending: {answer}")

    def _follow(self, queued: QueuedJob, now: datetime, report: StepReport) -> None:
        request = queued.request
        obj = self._kube.get_provisioning_request(NAMESPACE, request.name)
        if obj is None:
            return
        failed = _condition(obj, FAILED)
        provisioned = _condition(obj, PROVISIONED)
        decided = failed or provisioned
        if decided is None:
            self._wait(queued, _condition(obj, PROVISIONED, "False"), now, report)
            return
        queued.answer = f"{decided['type']}=True ({decided.get('reason')}): {decided.get('message')}"
        queued.answered_at = now
        if failed is not None:
            queued.state = "rejected"
            report.add(now, "kueue", f"{request.name} rejected: {queued.answer}")
            return
        queued.state = "admitted"
        annotations = {
            ANNOTATION_CONSUME_REQUEST: request.name,
            ANNOTATION_CONSUME_REQUEST_LEGACY: request.name,
        }
        job = replace(request.job, annotations=annotations)
        pods = StepReport()
        self._world.submit(job, now, pods)
        allowed = sum(1 for pod in pods.new_pods if self._admit(pod))
        report.add(
            now,
            "kueue",
            f"{request.name} admitted ({queued.answer}): {len(pods.new_pods)} pod(s) created to consume it, "
            f"{allowed} allowed by the webhook",
        )
