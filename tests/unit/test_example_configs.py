"""The example configs of examples/configs/ load through the real config parser and say what they claim."""

from __future__ import annotations

from pathlib import Path

import pytest

from shared.config import PolicyConfig, ScalerConfig, load_config

CONFIGS = Path(__file__).resolve().parents[2] / "examples" / "configs"
ZONE = "topology.kubernetes.io/zone"


def example(name: str) -> ScalerConfig:
    return load_config(CONFIGS / f"{name}.yaml")


@pytest.mark.parametrize("path", sorted(CONFIGS.glob("*.yaml")), ids=lambda p: p.stem)
def test_every_example_loads_through_the_config_parser(path: Path) -> None:
    config = load_config(path)
    assert config.node_groups
    assert all(g.price_per_hour is not None for g in config.node_groups)  # least-cost choice needs it


def test_the_examples_are_the_documented_set() -> None:
    assert sorted(p.stem for p in CONFIGS.glob("*.yaml")) == [
        "graviton",
        "kueue-provisioning",
        "p5-efa",
        "spot-on-demand",
        "zones",
    ]


def test_one_asg_per_zone_gives_each_group_one_zone_in_one_tier() -> None:
    config = example("zones")
    zones = [g.labels[ZONE] for g in config.node_groups]
    assert len(set(zones)) == len(zones) == 3
    assert len({g.asg_name for g in config.node_groups}) == 3
    assert len({g.priority for g in config.node_groups}) == 1


def test_spot_is_tried_first_and_on_demand_is_the_fallback() -> None:
    config = example("spot-on-demand")
    spot, on_demand = config.group("a10g-spot"), config.group("a10g-on-demand")
    assert spot.priority > on_demand.priority
    assert spot.instance_type == on_demand.instance_type and spot.taints == on_demand.taints
    # Spot is retried sooner than the default backoff (a config value, not a measured time)
    assert config.policy.backoff_initial_seconds < PolicyConfig().backoff_initial_seconds


def test_p5_declares_its_efa_interfaces_and_gangs() -> None:
    config = example("p5-efa")
    shape = config.group("h100-efa").shape
    assert shape is not None and shape.gpus == 8
    assert dict(shape.items)["vpc.amazonaws.com/efa"] == 32
    assert config.policy.gang_label == "training.kubeflow.org/job-name"


def test_graviton_groups_are_arm64_and_so_are_the_functions() -> None:
    config = example("graviton")
    assert {g.labels["kubernetes.io/arch"] for g in config.node_groups} == {"arm64"}
    assert config.deployment.architecture == "arm64"


def test_kueue_example_keeps_booked_capacity_ten_minutes() -> None:
    config = example("kueue-provisioning")
    assert config.policy.provisioning_booking_seconds == 600
    assert len(config.node_groups) == 2
