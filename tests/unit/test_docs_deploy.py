"""docs/deploy.md's table of Kubernetes permissions is what the RBAC manifest grants, no more, no less.

The ClusterRole and the status Role are generated from the adapter's one table of permissions
(shared/adapters/kubernetes/rbac.py); the doc's table names each (kind, API group, resource, verb),
and a named object where a Role grants only that one.
"""

from __future__ import annotations

import re
from pathlib import Path

from shared.adapters.kubernetes.rbac import cluster_role, status_role
from shared.constants import DEFAULT_STATUS_NAMESPACE

ROOT = Path(__file__).resolve().parents[2]
DEPLOY_DOC = ROOT / "docs" / "deploy.md"
MARKER = "<!-- rbac-table"
CODE = re.compile(r"`([^`]+)`")
NAMED = re.compile(r"^`([^`]+)` named `([^`]+)`$")

Grant = tuple[str, str, str, str, str]  # kind, API group, resource, resource name, verb


def documented_grants() -> set[Grant]:
    lines = DEPLOY_DOC.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(MARKER))
    grants: set[Grant] = set()
    for line in lines[start + 3 :]:  # the marker, the header row, the separator
        if not line.startswith("|"):
            break
        kind, group, resources, verbs = (cell.strip() for cell in line.strip("|").split("|")[:4])
        kind = "Role" if kind.startswith("Role") else kind
        api_group = "" if group == "core" else group.strip("`")
        named = NAMED.match(resources)
        pairs = [(named.group(1), named.group(2))] if named else [(r, "") for r in CODE.findall(resources)]
        for resource, name in pairs:
            grants.update((kind, api_group, resource, name, verb.strip()) for verb in verbs.split(","))
    return grants


def manifest_grants() -> set[Grant]:
    grants: set[Grant] = set()
    for role in (cluster_role(), status_role(DEFAULT_STATUS_NAMESPACE)):
        for rule in role["rules"]:
            names = rule.get("resourceNames") or [""]
            grants.update(
                (role["kind"], group, resource, name, verb)
                for group in rule["apiGroups"]
                for resource in rule["resources"]
                for name in names
                for verb in rule["verbs"]
            )
    return grants


def test_the_deploy_guide_lists_exactly_what_the_rbac_manifest_grants() -> None:
    # Given the table in docs/deploy.md and the roles the manifest is built from
    documented, granted = documented_grants(), manifest_grants()

    # Then they are the same grants
    assert documented, f"no table found after {MARKER!r} in docs/deploy.md"
    assert sorted(documented - granted) == [], "documented in docs/deploy.md but not granted"
    assert sorted(granted - documented) == [], "granted but not documented in docs/deploy.md"
