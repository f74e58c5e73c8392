"""The synthesized stack has every resource of the scaler, configured as the design asks."""

from __future__ import annotations

import json

from aws_cdk.assertions import Match

from shared.constants import (
    ALL_FUNCTIONS,
    ENV_TRACE_DISABLED,
    FUNCTION_AWS_EVENTS,
    FUNCTION_FORCE_SCALE_DOWN,
    FUNCTION_RECONCILE,
    FUNCTION_WEBHOOK,
    METRIC_ACTION_FAILURES,
    METRIC_CAPACITY_FAILURES,
    METRIC_DESIRED,
    METRIC_DISCARDED_WAKE_UPS,
    METRIC_IN_SERVICE,
    METRIC_OLDEST_PENDING_AGE,
    METRIC_PENDING_GPUS,
    METRIC_PENDING_PODS,
    METRIC_REPAIR_PAUSED,
    METRIC_UNHEALTHY_NODES,
    METRICS_NAMESPACE,
    RBAC_GROUP,
    TABLE_PARTITION_KEY,
    TABLE_SORT_KEY,
    TABLE_TTL_ATTRIBUTE,
    WEBHOOK_PATH,
)
from tests.infra.conftest import Synthesized


def test_stack_is_named_after_the_cluster(synthesized: Synthesized) -> None:
    assert synthesized.stack_name == f"BacklogScaler-{synthesized.config.cluster_name}"


def test_four_functions_with_fixed_entry_points(synthesized: Synthesized) -> None:
    # Given the default config, When synthesized, Then each function runs functions/<name>/handler.py
    handlers = sorted(
        r["Properties"]["Handler"] for r in synthesized.resources("AWS::Lambda::Function").values()
    )
    assert handlers == sorted(f"functions.{name}.handler.handler" for name in ALL_FUNCTIONS)


def test_functions_use_the_configured_runtime_and_arm64(synthesized: Synthesized) -> None:
    for name in ALL_FUNCTIONS:
        function = synthesized.function(name)
        assert function["Runtime"] == synthesized.config.deployment.python_runtime == "python3.12"
        assert function["Architectures"] == ["arm64"]
        assert len(function["Layers"]) == 1


def test_tracing_is_off_by_default_and_the_x_ray_sdk_is_not_loaded(synthesized: Synthesized) -> None:
    for name in ALL_FUNCTIONS:
        function = synthesized.function(name)
        assert function.get("TracingConfig", {"Mode": "PassThrough"}) == {"Mode": "PassThrough"}
        assert function["Environment"]["Variables"][ENV_TRACE_DISABLED] == "true"


def test_tracing_when_configured(vpc_synthesized: Synthesized) -> None:
    for name in ALL_FUNCTIONS:
        function = vpc_synthesized.function(name)
        assert function["TracingConfig"] == {"Mode": "Active"}
        assert function["Environment"]["Variables"][ENV_TRACE_DISABLED] == "false"


def test_functions_are_sized_for_their_work(synthesized: Synthesized) -> None:
    sizes = {
        name: (synthesized.function(name)["MemorySize"], synthesized.function(name)["Timeout"])
        for name in ALL_FUNCTIONS
    }
    assert sizes == {
        FUNCTION_RECONCILE: (1024, 300),
        FUNCTION_WEBHOOK: (256, 10),
        FUNCTION_FORCE_SCALE_DOWN: (512, 900),
        FUNCTION_AWS_EVENTS: (512, 120),
    }


def test_reconcile_is_a_single_writer(synthesized: Synthesized) -> None:
    assert synthesized.function(FUNCTION_RECONCILE)["ReservedConcurrentExecutions"] == 1
    for name in (FUNCTION_WEBHOOK, FUNCTION_FORCE_SCALE_DOWN, FUNCTION_AWS_EVENTS):
        assert "ReservedConcurrentExecutions" not in synthesized.function(name)


def test_functions_share_one_code_asset_and_one_dependency_layer(synthesized: Synthesized) -> None:
    codes = {json.dumps(synthesized.function(name)["Code"], sort_keys=True) for name in ALL_FUNCTIONS}
    assert len(codes) == 1
    synthesized.template.resource_count_is("AWS::Lambda::LayerVersion", 1)
    synthesized.template.has_resource_properties(
        "AWS::Lambda::LayerVersion",
        {"CompatibleRuntimes": ["python3.12"], "CompatibleArchitectures": ["arm64"]},
    )


def test_each_function_logs_to_its_own_group_with_the_configured_retention(synthesized: Synthesized) -> None:
    retention = synthesized.config.deployment.log_retention_days
    groups = synthesized.resources("AWS::Logs::LogGroup")
    # four functions + the API's access log
    assert len(groups) == 5
    assert {g["Properties"]["RetentionInDays"] for g in groups.values()} == {retention}
    targets = {synthesized.function(name)["LoggingConfig"]["LogGroup"]["Ref"] for name in ALL_FUNCTIONS}
    assert len(targets) == 4 and targets <= set(groups)


def test_state_table(synthesized: Synthesized) -> None:
    synthesized.template.has_resource(
        "AWS::DynamoDB::Table",
        {
            "Properties": {
                "KeySchema": [
                    {"AttributeName": TABLE_PARTITION_KEY, "KeyType": "HASH"},
                    {"AttributeName": TABLE_SORT_KEY, "KeyType": "RANGE"},
                ],
                "AttributeDefinitions": Match.array_with(
                    [
                        {"AttributeName": TABLE_PARTITION_KEY, "AttributeType": "S"},
                        {"AttributeName": TABLE_SORT_KEY, "AttributeType": "S"},
                    ]
                ),
                "BillingMode": "PAY_PER_REQUEST",
                "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True},
                "TimeToLiveSpecification": {"AttributeName": TABLE_TTL_ATTRIBUTE, "Enabled": True},
                "SSESpecification": {"SSEEnabled": True},
            },
            "DeletionPolicy": "Retain",
            "UpdateReplacePolicy": "Retain",
        },
    )


def test_trigger_queue_is_fifo_encrypted_with_a_fifo_dead_letter_queue(synthesized: Synthesized) -> None:
    failure_destination = _failure_destination_id(synthesized)  # the one standard queue
    queues = {k: v for k, v in synthesized.resources("AWS::SQS::Queue").items() if k != failure_destination}
    assert len(queues) == 2
    for queue in queues.values():
        props = queue["Properties"]
        assert props["FifoQueue"] is True
        assert props["ContentBasedDeduplication"] is False
        assert props["SqsManagedSseEnabled"] is True
    (main,) = [q["Properties"] for q in queues.values() if "RedrivePolicy" in q["Properties"]]
    (dlq_id,) = [logical_id for logical_id, q in queues.items() if "RedrivePolicy" not in q["Properties"]]
    assert main["RedrivePolicy"]["deadLetterTargetArn"] == {"Fn::GetAtt": [dlq_id, "Arn"]}
    assert main["DelaySeconds"] == synthesized.config.deployment.webhook_queue_delay_seconds
    # Lambda requires the visibility timeout to cover the consumer's timeout ...
    assert main["VisibilityTimeout"] > synthesized.function(FUNCTION_RECONCILE)["Timeout"]
    # ... and a failing message must reach the DLQ before it expires
    max_receive = main["RedrivePolicy"]["maxReceiveCount"]
    assert main["VisibilityTimeout"] * max_receive < main["MessageRetentionPeriod"]


def test_queues_and_topic_refuse_requests_without_tls(synthesized: Synthesized) -> None:
    deny_insecure = Match.object_like(
        {"Effect": "Deny", "Condition": {"Bool": {"aws:SecureTransport": "false"}}}
    )
    policies = synthesized.resources("AWS::SQS::QueuePolicy")
    assert len(policies) == 3  # the trigger queue, its DLQ, aws_events' on-failure destination
    for policy in policies.values():
        statements = policy["Properties"]["PolicyDocument"]["Statement"]
        assert any(
            s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
            for s in statements
        )
    synthesized.template.has_resource_properties(
        "AWS::SNS::TopicPolicy", {"PolicyDocument": {"Statement": Match.array_with([deny_insecure])}}
    )


def test_reconcile_consumes_the_queue_with_partial_batch_failures(synthesized: Synthesized) -> None:
    (queue_id,) = [
        logical_id
        for logical_id, q in synthesized.resources("AWS::SQS::Queue").items()
        if "RedrivePolicy" in q["Properties"]
    ]
    synthesized.template.has_resource_properties(
        "AWS::Lambda::EventSourceMapping",
        {
            "EventSourceArn": {"Fn::GetAtt": [queue_id, "Arn"]},
            "FunctionName": {"Ref": synthesized.function_logical_id(FUNCTION_RECONCILE)},
            "BatchSize": 10,
            "FunctionResponseTypes": ["ReportBatchItemFailures"],
        },
    )


def test_schedule_runs_reconcile(synthesized: Synthesized) -> None:
    synthesized.template.has_resource_properties(
        "AWS::Events::Rule",
        {
            "ScheduleExpression": "rate(1 minute)",
            "Targets": [
                Match.object_like(
                    {"Arn": {"Fn::GetAtt": [synthesized.function_logical_id(FUNCTION_RECONCILE), "Arn"]}}
                )
            ],
        },
    )


def test_launch_failures_of_the_configured_groups_go_to_aws_events(synthesized: Synthesized) -> None:
    target = Match.object_like(
        {"Arn": {"Fn::GetAtt": [synthesized.function_logical_id(FUNCTION_AWS_EVENTS), "Arn"]}}
    )
    synthesized.template.has_resource_properties(
        "AWS::Events::Rule",
        {
            "EventPattern": {
                # the stack's own account and region: a forwarded event of a same-named ASG is not ours
                "account": [{"Ref": "AWS::AccountId"}],
                "region": [synthesized.config.region],
                "source": ["aws.autoscaling"],
                "detail-type": ["EC2 Instance Launch Unsuccessful"],
                "detail": {"AutoScalingGroupName": [g.asg_name for g in synthesized.config.node_groups]},
            },
            "Targets": [target],
        },
    )
    synthesized.template.has_resource_properties(
        "AWS::Events::Rule",
        {
            "EventPattern": {
                "account": [{"Ref": "AWS::AccountId"}],
                "region": [synthesized.config.region],
                "source": ["aws.ec2"],
                "detail-type": Match.array_equals(
                    [
                        "EC2 Spot Instance Interruption Warning",
                        "EC2 Capacity Reservation Instance Interruption Warning",
                        "EC2 Instance Rebalance Recommendation",
                    ]
                ),
            },
            "Targets": [target],
        },
    )


def test_webhook_is_a_throttled_http_api_with_access_logs(synthesized: Synthesized) -> None:
    synthesized.template.has_resource_properties("AWS::ApiGatewayV2::Api", {"ProtocolType": "HTTP"})
    synthesized.template.has_resource_properties(
        "AWS::ApiGatewayV2::Stage",
        {
            "StageName": "$default",
            "AutoDeploy": True,
            "DefaultRouteSettings": {"ThrottlingRateLimit": 50, "ThrottlingBurstLimit": 100},
            "AccessLogSettings": {
                "DestinationArn": Match.any_value(),
                "Format": Match.string_like_regexp("requestId"),
            },
        },
    )
    routes = sorted(
        r["Properties"]["RouteKey"] for r in synthesized.resources("AWS::ApiGatewayV2::Route").values()
    )
    assert routes == [f"POST {WEBHOOK_PATH}", f"POST {WEBHOOK_PATH}/{{proxy+}}"]
    # The access log names the route by its key (an HTTP API variable), never by the request's path,
    # which carries the admission path token; and no REST API variable an HTTP API leaves empty
    (stage,) = synthesized.resources("AWS::ApiGatewayV2::Stage").values()
    fields = json.loads(stage["Properties"]["AccessLogSettings"]["Format"])
    assert fields["routeKey"] == "$context.routeKey"
    assert not any("path" in v.lower() for v in fields.values())


def test_webhook_secret_is_generated(synthesized: Synthesized) -> None:
    synthesized.template.has_resource_properties(
        "AWS::SecretsManager::Secret",
        {"GenerateSecretString": Match.object_like({"PasswordLength": 64, "ExcludePunctuation": True})},
    )


def test_notifications_topic_is_encrypted_with_a_rotating_key(synthesized: Synthesized) -> None:
    (key_id,) = synthesized.resources("AWS::KMS::Key")
    synthesized.template.has_resource_properties("AWS::KMS::Key", {"EnableKeyRotation": True})
    synthesized.template.has_resource_properties(
        "AWS::SNS::Topic", {"KmsMasterKeyId": {"Fn::GetAtt": [key_id, "Arn"]}}
    )


def test_cloudwatch_uses_the_topic_and_its_key_only_for_this_accounts_alarms(
    synthesized: Synthesized,
) -> None:
    """The service principal's grants carry the confused-deputy conditions: an alarm of another
    account (or region) cannot publish to the topic or use its key."""
    (key,) = synthesized.resources("AWS::KMS::Key").values()
    (policy,) = synthesized.resources("AWS::SNS::TopicPolicy").values()
    grants = [
        s
        for s in key["Properties"]["KeyPolicy"]["Statement"]
        + policy["Properties"]["PolicyDocument"]["Statement"]
        if s.get("Principal") == {"Service": "cloudwatch.amazonaws.com"}
    ]
    assert {s["Sid"] for s in grants} == {
        "AllowCloudWatchAlarmsToUseTheKey",
        "AllowCloudWatchAlarmsToPublish",
    }
    for statement in grants:
        conditions = statement["Condition"]
        assert conditions["StringEquals"] == {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}
        source_arn = json.dumps(conditions["ArnLike"]["aws:SourceArn"])
        for part in (":cloudwatch:", "AWS::AccountId", ":alarm:*"):  # the stack's region
            assert part in source_arn


def test_access_entries_map_the_cluster_roles_to_the_rbac_group(synthesized: Synthesized) -> None:
    entries = synthesized.resources("AWS::EKS::AccessEntry")
    assert (
        len(entries) == 3
    )  # reconcile, force_scale_down, aws_events; the webhook never talks to the cluster
    for entry in entries.values():
        props = entry["Properties"]
        assert props["ClusterName"] == synthesized.config.cluster_name
        assert props["KubernetesGroups"] == [RBAC_GROUP]
        assert props["Type"] == "STANDARD"
    role_ids = {entry["Properties"]["PrincipalArn"]["Fn::GetAtt"][0] for entry in entries.values()}
    function_roles = {
        name: synthesized.function(name)["Role"]["Fn::GetAtt"][0]
        for name in (FUNCTION_RECONCILE, FUNCTION_FORCE_SCALE_DOWN, FUNCTION_AWS_EVENTS)
    }
    assert role_ids == set(function_roles.values())


def _alarm_on(synthesized: Synthesized, metric_name: str) -> list[dict]:
    return [
        a["Properties"]
        for a in synthesized.resources("AWS::CloudWatch::Alarm").values()
        if a["Properties"].get("MetricName") == metric_name
    ]


def test_alarms_notify_the_topic(synthesized: Synthesized) -> None:
    (topic_id,) = synthesized.resources("AWS::SNS::Topic")
    alarms = synthesized.resources("AWS::CloudWatch::Alarm")
    assert alarms
    for alarm in alarms.values():
        assert alarm["Properties"]["AlarmActions"] == [{"Ref": topic_id}]


def test_an_errors_alarm_per_function(synthesized: Synthesized) -> None:
    errors = _alarm_on(synthesized, "Errors")
    alarmed = {a["Dimensions"][0]["Value"]["Ref"] for a in errors}
    assert alarmed == {synthesized.function_logical_id(name) for name in ALL_FUNCTIONS}


def test_dead_letter_queue_alarms(synthesized: Synthesized) -> None:
    # One per parking place: the trigger queue's DLQ and aws_events' on-failure destination
    alarms = _alarm_on(synthesized, "ApproximateNumberOfMessagesVisible")
    queues = {a["Dimensions"][0]["Value"]["Fn::GetAtt"][0] for a in alarms}
    assert len(alarms) == 2
    assert queues == {_dlq_id(synthesized), _failure_destination_id(synthesized)}
    for alarm in alarms:
        assert alarm["Threshold"] == 1
        assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"


def _dlq_id(synthesized: Synthesized) -> str:
    (queue,) = [
        q["Properties"]["RedrivePolicy"]["deadLetterTargetArn"]["Fn::GetAtt"][0]
        for q in synthesized.resources("AWS::SQS::Queue").values()
        if "RedrivePolicy" in q["Properties"]
    ]
    return str(queue)


def _failure_destination_id(synthesized: Synthesized) -> str:
    function_id = synthesized.function_logical_id(FUNCTION_AWS_EVENTS)
    (config,) = [
        c["Properties"]
        for c in synthesized.resources("AWS::Lambda::EventInvokeConfig").values()
        if c["Properties"]["FunctionName"] == {"Ref": function_id}
    ]
    return str(config["DestinationConfig"]["OnFailure"]["Destination"]["Fn::GetAtt"][0])


def test_aws_events_parks_what_still_fails_in_an_encrypted_standard_queue(synthesized: Synthesized) -> None:
    # Given the function EventBridge invokes asynchronously
    queue = synthesized.template_json["Resources"][_failure_destination_id(synthesized)]

    # Then its on-failure destination is an SQS queue: encrypted, not FIFO (Lambda refuses FIFO)
    assert queue["Type"] == "AWS::SQS::Queue"
    assert queue["Properties"]["SqsManagedSseEnabled"] is True
    assert "FifoQueue" not in queue["Properties"]
    assert queue["Properties"]["MessageRetentionPeriod"] == 14 * 24 * 3600


def test_oldest_pending_pod_alarm(synthesized: Synthesized) -> None:
    (alarm,) = _alarm_on(synthesized, METRIC_OLDEST_PENDING_AGE)
    assert alarm["Namespace"] == METRICS_NAMESPACE
    assert alarm["Dimensions"] == [{"Name": "Cluster", "Value": synthesized.config.cluster_name}]
    assert alarm["Threshold"] == synthesized.config.deployment.alarm_oldest_pending_seconds


def test_a_write_that_failed_on_one_object_raises_an_alarm(synthesized: Synthesized) -> None:
    # Isolated failures (AccessDenied on one ASG, a 403 eviction) do not fail the function: this
    # alarm is what fires on the first one
    (alarm,) = _alarm_on(synthesized, METRIC_ACTION_FAILURES)
    assert alarm["Namespace"] == METRICS_NAMESPACE
    assert alarm["Dimensions"] == [{"Name": "Cluster", "Value": synthesized.config.cluster_name}]
    assert (alarm["Statistic"], alarm["Period"], alarm["Threshold"]) == ("Sum", 300, 1)
    assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    assert alarm["TreatMissingData"] == "notBreaching"


def test_a_discarded_wake_up_raises_an_alarm(synthesized: Synthesized) -> None:
    # Given a wake-up no retry can make valid is acknowledged, not parked in the dead-letter queue
    # Then the metric the reconcile function counts it in alarms on the first one
    (alarm,) = _alarm_on(synthesized, METRIC_DISCARDED_WAKE_UPS)
    assert alarm["Namespace"] == METRICS_NAMESPACE
    assert alarm["Dimensions"] == [{"Name": "Cluster", "Value": synthesized.config.cluster_name}]
    assert (alarm["Statistic"], alarm["Period"], alarm["Threshold"]) == ("Sum", 300, 1)
    assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    assert alarm["TreatMissingData"] == "notBreaching"


def test_capacity_failure_alarm_per_group_over_30_minutes(synthesized: Synthesized) -> None:
    alarms = _alarm_on(synthesized, METRIC_CAPACITY_FAILURES)
    assert len(alarms) == len(synthesized.config.node_groups)
    groups = set()
    for alarm in alarms:
        assert alarm["Period"] == 1800
        assert alarm["Statistic"] == "Sum"
        assert alarm["Threshold"] == synthesized.config.deployment.alarm_capacity_failures
        assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
        dimensions = {d["Name"]: d["Value"] for d in alarm["Dimensions"]}
        assert dimensions["Cluster"] == synthesized.config.cluster_name
        groups.add(dimensions["Group"])
    assert groups == set(synthesized.config.group_names)


def test_a_paused_node_repair_raises_an_alarm_per_group(synthesized: Synthesized) -> None:
    # A group with more unhealthy nodes than max_unhealthy_fraction terminates none for health: the
    # operator must look (a bad AMI, driver or zone)
    alarms = _alarm_on(synthesized, METRIC_REPAIR_PAUSED)
    assert {next(d["Value"] for d in a["Dimensions"] if d["Name"] == "Group") for a in alarms} == set(
        synthesized.config.group_names
    )
    for alarm in alarms:
        assert (alarm["Statistic"], alarm["Threshold"]) == ("Maximum", 1)
        assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"


def test_dashboard_has_a_node_lifecycle_row(synthesized: Synthesized) -> None:
    (dashboard,) = synthesized.resources("AWS::CloudWatch::Dashboard").values()
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    assert METRIC_UNHEALTHY_NODES in body and "Nodes repaired and rotated" in body


def test_dashboard_shows_backlog_gpus_and_groups(synthesized: Synthesized) -> None:
    (dashboard,) = synthesized.resources("AWS::CloudWatch::Dashboard").values()
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    for metric in (
        METRIC_PENDING_PODS,
        METRIC_PENDING_GPUS,
        METRIC_DESIRED,
        METRIC_IN_SERVICE,
        METRIC_CAPACITY_FAILURES,
    ):
        assert metric in body
    for group in synthesized.config.group_names:
        assert f"{group}: desired vs in service" in body


def test_outputs_tell_the_operator_what_to_do_next(synthesized: Synthesized) -> None:
    outputs = synthesized.template_json["Outputs"]
    for name in (
        "WebhookUrl",
        "WebhookSecretArn",
        "ForceScaleDownFunctionName",
        "RbacManifest",
        "AdmissionWebhookManifest",
        "EventForwarderNote",
        "StateTableName",
        "DashboardName",
    ):
        assert name in outputs
    endpoint, path = outputs["WebhookUrl"]["Value"]["Fn::Join"][1]
    assert endpoint["Fn::GetAtt"][1] == "ApiEndpoint"
    assert path == WEBHOOK_PATH


def test_output_values_stay_small(synthesized: Synthesized) -> None:
    # CloudFormation keeps output values short; the manifests are the longest ones.
    for name, output in synthesized.template_json["Outputs"].items():
        assert len(json.dumps(output["Value"])) < 4096, name
