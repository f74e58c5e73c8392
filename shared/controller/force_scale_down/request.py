"""The forced scale-down request: the payload's model and its validation against the config."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Annotated

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from shared.config import ScalerConfig
from shared.controller.validation import describe_validation_error
from shared.domain.errors import MAX_ERRORS_SHOWN, InvalidRequestError
from shared.domain.operations import (
    INTERRUPTION_REQUESTER,
    MAX_DRAIN_NODES,
    MAX_GROUP_NAME_LENGTH,
    MAX_NODE_NAME_LENGTH,
    MAX_REQUESTED_BY_LENGTH,
)

DEFAULT_GRACE_SECONDS = 300
MAX_GRACE_SECONDS = 24 * 3600
MAX_TARGET = 100_000  # a sanity bound; the group's own max size is checked once its ASG is read


NodeName = Annotated[
    StrictStr,
    Field(min_length=1, max_length=MAX_NODE_NAME_LENGTH, pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"),
]


def _at_most(limit: int) -> Callable[[object], object]:
    """A before-check of an array's length: pydantic counts only the items that validated against
    `max_length`, so a million bad items would cost a million errors before the bound applied."""

    def check(value: object) -> object:
        if isinstance(value, list | tuple) and len(value) > limit:
            raise ValueError(f"at most {limit} items, got {len(value)}")
        return value

    return check


class ForceScaleDownRequest(BaseModel):
    """`{"group": "a100", "target": 0}` or `{"group": "a100", "nodes": ["ip-..."]}`, plus options.

    Strict, as the JSON of a manual invoke gives it: booleans are `true`/`false`, numbers JSON integers
    (no `"false"`, `0` for false or `false` for 0), every string and array is bounded, unknown fields are
    refused. `target` is checked against the group's max size once the ASG is read (`check_against_group`).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    group: Annotated[
        StrictStr,
        Field(min_length=1, max_length=MAX_GROUP_NAME_LENGTH, pattern=r"^[a-zA-Z0-9][a-zA-Z0-9_.-]*$"),
    ]
    target: Annotated[StrictInt, Field(ge=0, le=MAX_TARGET)] | None = None
    nodes: Annotated[tuple[NodeName, ...], BeforeValidator(_at_most(MAX_DRAIN_NODES))] | None = Field(
        default=None, min_length=1, max_length=MAX_DRAIN_NODES, validate_default=True
    )
    dry_run: StrictBool | None = None  # None: the function's own dry-run setting
    grace_seconds: Annotated[StrictInt, Field(ge=0, le=MAX_GRACE_SECONDS)] = DEFAULT_GRACE_SECONDS
    # After the grace, delete pods that PodDisruptionBudgets still protect; and take instances the
    # operator protected from scale-in (safety.scale_in_protection), refused without it.
    force: StrictBool = False
    requested_by: Annotated[StrictStr, Field(max_length=MAX_REQUESTED_BY_LENGTH)] = ""

    @model_validator(mode="before")
    @classmethod
    def _few_unknown_fields(cls, data: object) -> object:
        # `extra="forbid"` reports every unknown key; a payload of a million keys names the first few.
        if isinstance(data, Mapping) and len(data) > len(cls.model_fields):
            unknown = [k for k in data if k not in cls.model_fields][:MAX_ERRORS_SHOWN]
            return {k: v for k, v in data.items() if k in cls.model_fields or k in unknown}
        return data

    @field_validator("nodes")
    @classmethod
    def _exactly_one_of_target_or_nodes(
        cls, nodes: tuple[str, ...] | None, info: ValidationInfo
    ) -> tuple[str, ...] | None:
        has_target = info.data.get("target") is not None
        # A target that failed its own validation is absent from `info.data`: it is reported once, there.
        if nodes is None and "target" in info.data and not has_target:
            raise ValueError("give exactly one of target (a node count) or nodes (node names)")
        if nodes is not None and has_target:
            raise ValueError("give either target or nodes, not both")
        if nodes is not None and len(set(nodes)) != len(nodes):
            raise ValueError("node names must be unique")
        return nodes

    @field_validator("requested_by")
    @classmethod
    def _not_the_interruption_hold(cls, requested_by: str) -> str:
        # The name the scaler gives an interruption warning's hold: a drain stored under it would
        # evict nothing after its first pass (DrainIntent.held).
        if requested_by == INTERRUPTION_REQUESTER:
            raise ValueError(f"{INTERRUPTION_REQUESTER!r} is reserved for interruption warnings' holds")
        return requested_by


def parse_force_scale_down(payload: object, config: ScalerConfig) -> ForceScaleDownRequest:
    """Validate a payload against the model and the config; InvalidRequestError naming the fields."""
    if not isinstance(payload, Mapping):
        raise InvalidRequestError(f"request: expected a JSON object, got {type(payload).__name__}")
    try:
        request = ForceScaleDownRequest.model_validate(payload)
    except ValidationError as exc:
        message, fields = describe_validation_error(exc, "request")
        raise InvalidRequestError(message, fields) from exc
    if request.group not in config.group_names:
        raise InvalidRequestError(
            f"request: group: unknown node group {request.group!r}; "
            f"configured: {', '.join(config.group_names)}",
            ("group",),
        )
    return request


__all__ = ["ForceScaleDownRequest", "InvalidRequestError", "parse_force_scale_down"]
