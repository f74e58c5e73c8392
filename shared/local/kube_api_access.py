"""Authentication and RBAC of the fake Kubernetes API server: one bearer token, one ClusterRole."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from shared.local.kube_api_resources import ApiError, JsonObj

# --------------------------------------------------------------------------- RBAC


@dataclass(frozen=True)
class _PolicyRule:
    """One rule of a ClusterRole or Role; ``*`` matches any group, resource or verb, as in the real
    RBAC. A Role's rule holds in its namespace only; a rule with resourceNames only for requests naming
    one of them (so never a list or a create, as in the real authorizer)."""

    groups: frozenset[str]
    resources: frozenset[str]
    verbs: frozenset[str]
    names: frozenset[str] = frozenset()  # resourceNames (empty: any)
    namespace: str | None = None  # a Role's namespace (None: a ClusterRole's rule, every namespace)

    def allows(self, group: str, resource: str, verb: str, name: str | None, namespace: str | None) -> bool:
        return (
            ("*" in self.groups or group in self.groups)
            and ("*" in self.resources or resource in self.resources)
            and ("*" in self.verbs or verb in self.verbs)
            and (not self.names or name in self.names)
            and (self.namespace is None or namespace == self.namespace)
        )


def _role_rules(role: JsonObj, kind: str) -> tuple[_PolicyRule, ...]:
    if role.get("kind") != kind:
        raise ValueError(f"expected a {kind}, got {role.get('kind')!r}")
    namespace = (role.get("metadata") or {}).get("namespace") if kind == "Role" else None
    if kind == "Role" and not namespace:
        raise ValueError("a Role needs metadata.namespace")
    rules = []
    for rule in role.get("rules") or ():
        if rule.get("nonResourceURLs"):
            raise ValueError("nonResourceURLs are not supported by the fake")
        rules.append(
            _PolicyRule(
                frozenset(rule.get("apiGroups") or ()),
                frozenset(rule.get("resources") or ()),
                frozenset(rule.get("verbs") or ()),
                frozenset(rule.get("resourceNames") or ()),
                namespace,
            )
        )
    return tuple(rules)


def _verb(method: str, name: str | None, query: dict[str, str]) -> str:
    """The RBAC verb of a resource request, as the API server's RequestInfo derives it."""
    if method == "GET":
        if query.get("watch") in ("true", "1"):
            return "watch"
        return "get" if name else "list"
    if method == "DELETE":
        return "delete" if name else "deletecollection"
    return {"POST": "create", "PUT": "update", "PATCH": "patch"}.get(method, method.lower())


def _forbidden(
    user: str, verb: str, group: str, resource: str, sub: str | None, name: str | None, namespace: str | None
) -> ApiError:
    group_resource = f"{resource}.{group}" if group else resource
    full = f"{resource}/{sub}" if sub else resource
    target = f'{group_resource} "{name}"' if name else group_resource
    scope = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
    details: JsonObj = {"name": name} if name else {}
    if group:
        details["group"] = group
    details["kind"] = resource
    return ApiError(
        403,
        f'{target} is forbidden: User "{user}" cannot {verb} resource "{full}" '
        f'in API group "{group}" {scope}',
        details=details,
    )


class AccessControl:
    """Who may call the fake server: one bearer token, one enforced ClusterRole, and optionally the
    tokenless loopback user (kubectl over plain HTTP), who is unrestricted."""

    def __init__(self, lock: threading.RLock, *, allow_anonymous_loopback: bool) -> None:
        self._lock = lock
        self.allow_anonymous_loopback = allow_anonymous_loopback
        self._token: str | Callable[[str], bool] | None = None
        self._rules: tuple[_PolicyRule, ...] | None = None  # None: every authenticated request is allowed
        self._user = ""

    def enforce_cluster_role(self, role: JsonObj | None, user: str, roles: Sequence[JsonObj] = ()) -> None:
        """Authorize resource requests against the rules of `role` and of the namespaced `roles` as
        `user` (`role` None: allow all)."""
        rules = (
            None
            if role is None
            else _role_rules(role, "ClusterRole") + tuple(r for ns in roles for r in _role_rules(ns, "Role"))
        )
        with self._lock:
            self._rules = rules
            self._user = user

    def require_token(self, token: str | Callable[[str], bool] | None) -> None:
        """Demand ``Authorization: Bearer <token>``, or a header the predicate accepts (an EKS token,
        which is signed anew every few minutes); None disables the check."""
        with self._lock:
            self._token = token

    def is_anonymous(self, headers: dict[str, str], client_host: str) -> bool:
        """A tokenless request from loopback while that is allowed: the unrestricted user."""
        return (
            self.allow_anonymous_loopback
            and "authorization" not in headers
            and client_host in ("127.0.0.1", "::1")
        )

    def authenticates(self, headers: dict[str, str], anonymous: bool) -> bool:
        """Whether the request carries the required token (or needs none)."""
        with self._lock:
            token = self._token
        if token is None or anonymous:
            return True
        header = headers.get("authorization", "")
        return token(header) if callable(token) else header == f"Bearer {token}"

    def authorize(
        self, method: str, query: dict[str, str], group: str, rest: list[str], namespace: str | None
    ) -> None:
        """Raise 403 unless the enforced ClusterRole grants this resource request."""
        with self._lock:
            rules, user = self._rules, self._user
        if rules is None:
            return
        resource = rest[0]
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        verb = _verb(method, name, query)
        full = f"{resource}/{sub}" if sub else resource
        if not any(rule.allows(group, full, verb, name, namespace) for rule in rules):
            raise _forbidden(user, verb, group, resource, sub, name, namespace)
