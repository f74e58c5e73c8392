"""The simulated world the replay's collaborators share, and what changed in it since the last plan."""

from __future__ import annotations

from collections.abc import Sequence

from shared.config import PolicyConfig
from shared.domain.model import Pod
from shared.local.sim.entities import DIMS, SimGroup, SimJob, SimNode, SimOptions
from shared.local.sim.events import EventQueue
from shared.local.sim.scheduler import Scheduler


class SimState:
    """Groups, nodes, pods, the backlog, the idle-GPU tally, and the flags that say a plan may differ.

    A plan can differ from the last one when `dirty` (nodes, instances changed) or `unseen` != 0 (backlog
    members or node idleness differ from what the last plan saw; changes undone before any plan saw them
    cancel out).
    """

    def __init__(
        self, options: SimOptions, policy: PolicyConfig, groups: Sequence[SimGroup], events: EventQueue
    ) -> None:
        self.options = options
        self.policy = policy
        self.groups = list(groups)
        self.group_by_name = {g.name: g for g in self.groups}
        self.events = events
        self.nodes: dict[str, SimNode] = {}
        self.live_pods: dict[str, Pod] = {}  # key -> current domain Pod (pending or running)
        self.job_of: dict[str, SimJob] = {}  # pod key -> its job
        self.pending: list[SimJob] = []  # FIFO
        self.arrived: list[SimJob] = []  # arrived at this instant, not tried by the scheduler yet
        self.scheduler = Scheduler(DIMS, options.scoring)
        # With attrition the plan reads every node's free GPUs, not only its idleness: any bind or
        # finish may change the marks, so the reconcile after it is not skipped.
        self.steers = policy.attrition.enabled or policy.migration.enabled
        self.idle = [0, 0, 0, 0, 0]  # idle GPUs right now by cause (BOOTING, EMPTY, FRAGMENTED, HELD, BROKEN)
        self.pending_gpus = 0
        self.capacity_grew = False
        self.dirty = True
        self.unseen = 0
        self.epoch = 0  # plans run so far: which plan last saw a job pending
        self.last_progress = 0  # last job arrival, start or finish, node registration or scale-down
        self.last_active = 0

    def untally(self, node: SimNode, now: int) -> None:
        """Before a node changes: account its idle time so far and take it out of the idle tally."""
        node.account(now)
        cause, gpus = node.idle_gpus()
        self.idle[cause] -= gpus

    def tally(self, node: SimNode) -> None:
        cause, gpus = node.idle_gpus()
        self.idle[cause] += gpus

    def restyle(self, node: SimNode) -> None:
        """Its cordon or mark changed: the scheduler and the planner see it anew."""
        node.forget_domain()
        self.scheduler.change(node.slot, node_class=node.node_class())
