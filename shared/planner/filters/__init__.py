"""kube-scheduler's filters, one module each, named after the plugins they mirror
(kubernetes/kubernetes pkg/scheduler/framework/plugins/<name>/):

  node_unschedulable   NodeUnschedulable    spec.unschedulable, unless tolerated
  node_affinity        NodeAffinity         nodeSelector + required node affinity
  taint_toleration     TaintToleration      NoSchedule/NoExecute taints
  node_resources_fit   NodeResourcesFit     requests (with native sidecars and overhead) vs free room
  node_ports           NodePorts            hostPort conflicts
  inter_pod_affinity   InterPodAffinity     required pod affinity / anti-affinity, both directions
  pod_topology_spread  PodTopologySpread    DoNotSchedule constraints
  volume_binding       VolumeBinding + VolumeZone: bound PVs' node affinity and zone labels,
                       WaitForFirstConsumer classes' allowedTopologies, missing claims
  dynamic_resources    DynamicResources     DRA claims allocated on ResourceSlices (structured parameters)

Contract shared by every filter: a function of a pod (and, for the stateful ones, the per-domain
counts the simulation keeps) and one node view, returning None when the node passes or the
reason kube-scheduler itself would give ("node(s) didn't match pod anti-affinity rules"). The
same filters judge registered, booting and template nodes.
"""
