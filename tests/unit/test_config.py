"""The scaler config: defaults, and errors that name the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from shared.config import load_config, parse_config
from shared.domain.errors import ConfigError

GROUP = {"name": "a100", "asg_name": "research-a100", "allocatable": {"cpu": "95", "nvidia.com/gpu": 8}}


def doc(**overrides: object) -> dict[str, object]:
    base: dict[str, object] = {"cluster_name": "research", "node_groups": [dict(GROUP)]}
    base.update(overrides)
    return base


def test_the_example_config_loads_with_defaults() -> None:
    config = load_config(Path(__file__).resolve().parents[2] / "examples" / "config.yaml")
    assert config.group_names == ("a100", "v100")
    assert config.policy.idle_seconds == 600
    assert config.group("a100").shape is not None
    assert config.group("a100").shape.gpus == 8  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("groups", "message"),
    [
        ([GROUP, GROUP], "node_groups: duplicate node group name 'a100'"),
        (
            [{**GROUP, "taints": [{"key": "k", "effect": "Sometimes"}]}],
            "node_groups[0].taints[0].effect: Input should be",
        ),
        ([{**GROUP, "max_size": -1}], "node_groups[0].max_size: Input should be greater than or equal to 0"),
        (
            [{**GROUP, "allocatable": {"memory": "lots"}}],
            "node_groups[0].allocatable: memory: unparsable quantity",
        ),
        (
            [{**GROUP, "allocatable": {"nvidia.com/gpu": "1E100000000"}}],
            "node_groups[0].allocatable: nvidia.com/gpu: quantity '1E100000000' is out of range",
        ),
        (
            [{**GROUP, "allocatable": {"nvidia.com/gpu": 1.5}}],
            "node_groups[0].allocatable: nvidia.com/gpu: quantity '1.5' must be an integer",
        ),
        ([{"name": "x", "asg_name": "y"}], "node_groups[0]: give allocatable or instance_type"),
        ([{**GROUP, "colour": "red"}], "node_groups[0].colour: unknown key; known keys here: allocatable,"),
    ],
)
def test_bad_config_names_the_field_and_the_problem(groups: list[object], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(doc(node_groups=groups), "cfg.yaml")
    assert f"cfg.yaml: {message}" in str(caught.value) or message in str(caught.value)


@pytest.mark.parametrize("asg_name", ["research-*", "research-a10?", "*"])
def test_an_asg_name_with_an_iam_wildcard_is_refused(asg_name: str) -> None:
    # Given a group whose ASG name would widen the IAM resource of the scaling permissions
    # When the config is parsed / Then it is refused, naming the field and why
    with pytest.raises(ConfigError, match=r"node_groups\[0\]\.asg_name: .*would be IAM wildcards"):
        parse_config(doc(node_groups=[{**GROUP, "asg_name": asg_name}]))


def test_policy_fraction_must_be_a_fraction() -> None:
    with pytest.raises(ConfigError, match=r"policy\.max_scale_in_fraction"):
        parse_config(doc(policy={"max_scale_in_fraction": 1.5}))


def test_unreadable_or_invalid_yaml_is_a_config_error(tmp_path: Path) -> None:
    bad = tmp_path / "c.yaml"
    bad.write_text("cluster_name: [unclosed")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad)
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.yaml")


def test_a_yaml_or_json_syntax_error_is_one_line_naming_where(tmp_path: Path) -> None:
    # Given a YAML config with a list item where a flow sequence was opened, and a truncated JSON one
    yaml_file = tmp_path / "c.yaml"
    yaml_file.write_text("cluster_name: x\nnode_groups: [\n  - a: b\n")
    json_file = tmp_path / "c.json"
    json_file.write_text('{"cluster_name": "x",')
    # When loaded, Then each error is one line with the file, the problem and its position
    for path, kind in ((yaml_file, "YAML"), (json_file, "JSON")):
        with pytest.raises(ConfigError) as raised:
            load_config(path)
        message = str(raised.value)
        assert "\n" not in message
        assert message.startswith(f"{path}: not valid {kind}: ") and " at line " in message


@pytest.mark.parametrize(
    ("document", "message"),
    [
        (doc(clustr_name="x"), "config: clustr_name: unknown key; did you mean 'cluster_name'?"),
        (
            doc(node_groups=[{**GROUP, "max_sise": 3}]),
            "config: node_groups[0].max_sise: unknown key; did you mean 'max_size'?",
        ),
        (
            doc(policy={"attrition": {"enabeld": False}}),
            "config: policy.attrition.enabeld: unknown key; did you mean 'enabled'?",
        ),
        (
            doc(node_groups=[{**GROUP, "taints": [{"key": "k", "effect": "NoSchedule", "valu": "x"}]}]),
            "config: node_groups[0].taints[0].valu: unknown key; did you mean 'value'?",
        ),
    ],
)
def test_an_unknown_key_suggests_the_key_it_likely_meant(document: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_config(document)
    assert str(raised.value) == message


@pytest.mark.parametrize(
    ("document", "message"),
    [
        # YAML reads 1e400 as infinity: a price of $inf is refused, not planned with
        (doc(node_groups=[{**GROUP, "price_per_hour": float("inf")}]),
         "node_groups[0].price_per_hour: Input should be a finite number"),
        (doc(policy={"max_scale_in_fraction": float("nan")}),
         "policy.max_scale_in_fraction: Input should be a finite number"),
        (doc(node_groups=[{**GROUP, "max_size": 100_000}]),
         "node_groups[0].max_size: Input should be less than or equal to 5000"),
        (doc(policy={"idle_seconds": 10**12}),
         "policy.idle_seconds: must be at most 1,000,000,000 (got 1,000,000,000,000)"),
    ],
)  # fmt: skip
def test_numbers_are_finite_and_sizes_bounded(document: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_config(document)
    assert str(raised.value) == f"config: {message}"


@pytest.mark.parametrize("text", ["", "\n", "# only a comment\n", "---\n"])
def test_an_empty_config_file_is_named_as_such(tmp_path: Path, text: str) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as raised:
        load_config(path)
    assert (
        str(raised.value)
        == f"{path}: the config is empty (expected a mapping with cluster_name and node_groups)"
    )


def test_1e400_in_yaml_is_refused_as_infinite(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(
        "cluster_name: research\nnode_groups:\n  - {name: a100, asg_name: research-a100, "
        "instance_type: p4d.24xlarge, price_per_hour: 1e400}\n",
        encoding="utf-8",
    )
    with pytest.raises(
        ConfigError, match=r"node_groups\[0\].price_per_hour: Input should be a finite number"
    ):
        load_config(path)
