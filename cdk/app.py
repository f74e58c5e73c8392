#!/usr/bin/env python3
"""Entry point of the CDK app: `cdk synth` / `cdk deploy` run this file (see `app` in cdk.json).

Reads the scaler config from the `scaler` context key, builds `BacklogScaler-<cluster>`, runs the
cdk-nag AwsSolutions checks, and writes the cluster's RBAC manifest next to the templates.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __name__ == "__main__":
    # Run as a script, Python puts cdk/ first on sys.path, where cdk/constructs/ would shadow the
    # `constructs` library. Import everything from the repo root instead.
    _script_dir = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _script_dir]
    sys.path.insert(0, str(_script_dir.parent))
    # `cdk synth` in an environment without the cdk extra would end in an ImportError's traceback.
    from importlib.util import find_spec

    _missing = [name for name in ("aws_cdk", "constructs", "cdk_nag") if find_spec(name) is None]
    if _missing:
        sys.exit(
            f"cdk/app.py: the CDK app needs the cdk extra, which this Python ({sys.executable}) lacks "
            f"(missing: {', '.join(_missing)}). Install it: pip install -e '.[cdk]'"
        )

import json
import os
from collections.abc import Mapping
from typing import Any

import aws_cdk as cdk
import jsii.errors
from aws_cdk import cx_api

from cdk.context import cdk_json_context, scaler_config, stack_name
from cdk.manifests import rbac_manifest, rbac_manifest_filename
from cdk.nag import add_nag_checks
from cdk.stacks.scaler_stack import BacklogScalerStack
from shared.domain.errors import ConfigError

VALIDATION_REPORT_FILE = "validation-report.json"


def build_app(
    context: Mapping[str, Any] | None = None,
    *,
    outdir: str | None = None,
    builtin_validation: bool = True,
) -> tuple[cdk.App, BacklogScalerStack]:
    """The app and its one stack. `context` overrides cdk.json's (which the CLI also passes).

    `builtin_validation=False` skips CDK's own template checks (seconds per synth); the tests run
    cfn-lint on the template instead.
    """
    app = cdk.App(
        context={**cdk_json_context(), **(context or {})},
        outdir=outdir,
        builtin_cloud_formation_validation=builtin_validation,
    )
    config = scaler_config(app)
    stack = BacklogScalerStack(
        app,
        stack_name(config),
        config=config,
        # The region is the cluster's; the account is the caller's (unresolved in an offline synth).
        env=cdk.Environment(account=os.environ.get("CDK_DEFAULT_ACCOUNT"), region=config.region),
    )
    add_nag_checks(app)
    return app, stack


def synth(app: cdk.App, stack: BacklogScalerStack) -> cx_api.CloudAssembly:
    """Synthesize (cdk-nag runs here) and write the RBAC manifest into the cloud assembly."""
    assembly = app.synth()
    cluster = stack.config.cluster_name
    (Path(assembly.directory) / rbac_manifest_filename(cluster)).write_text(
        rbac_manifest(cluster, stack.config.kubernetes.status_namespace), encoding="utf-8"
    )
    return assembly


def unacknowledged_findings(assembly_dir: str) -> list[str]:
    """Error-level findings of the validation plugins (cdk-nag) left in the assembly's report."""
    path = Path(assembly_dir) / VALIDATION_REPORT_FILE
    if not path.exists():
        return []
    report = json.loads(path.read_text(encoding="utf-8"))
    findings = []
    for plugin in report.get("pluginReports", []):
        for violation in plugin.get("violations", []):
            if violation.get("severity", "error") in ("error", "fatal"):
                for construct in violation.get("violatingConstructs", []) or [{}]:
                    where = construct.get("constructPath", "?")
                    findings.append(f"{violation.get('ruleName')}: {where}")
    return findings


def main() -> int:
    try:
        app, stack = build_app()
        assembly = synth(app, stack)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except jsii.errors.JSIIError as exc:  # e.g. a failed validation or bundling
        print(f"error: {exc}", file=sys.stderr)
        return 1
    findings = unacknowledged_findings(assembly.directory)
    if findings:
        print("error: unacknowledged cdk-nag findings:\n  " + "\n  ".join(findings), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
