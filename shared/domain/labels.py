"""Label requirements and selectors, shared by node affinity, pod affinity, spread and volumes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Requirement:
    """One node selector requirement: key, operator (In, NotIn, Exists, DoesNotExist, Gt, Lt), values."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def holds(self, labels: Mapping[str, str]) -> bool:
        """Evaluate against a node's labels."""
        present = self.key in labels
        op = self.operator
        if op == "In":
            return present and labels[self.key] in self.values
        if op == "NotIn":
            return not present or labels[self.key] not in self.values
        if op == "Exists":
            return present
        if op == "DoesNotExist":
            return not present
        if op in ("Gt", "Lt"):
            if not present or len(self.values) != 1:
                return False
            try:
                have, want = int(labels[self.key]), int(self.values[0])
            except ValueError:
                return False
            return have > want if op == "Gt" else have < want
        return False


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A metav1.LabelSelector: matchLabels ANDed with matchExpressions (In, NotIn, Exists,
    DoesNotExist). The empty selector matches everything; a nil selector is represented by None."""

    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether `labels` satisfy the selector."""
        for key, value in self.match_labels:
            if labels.get(key) != value:
                return False
        # A loop rather than all() over a generator: asked of every pod a placed pod may count for.
        for req in self.match_expressions:  # noqa: SIM110
            if not req.holds(labels):
                return False
        return True
