"""deploy/monitoring/alerts.yaml: every alert reads a metric /metrics exposes, waits before
firing, has a severity, and links a runbook that exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parents[2]
RULES = yaml.safe_load((ROOT / "deploy" / "monitoring" / "alerts.yaml").read_text())


def test_every_alert_reads_an_exposed_metric_and_links_its_runbook(db, settings, fleet):
    settings.PORTAL_METRICS_TOKEN = "t"
    text = Client().get("/metrics", HTTP_AUTHORIZATION="Bearer t").content.decode()
    exposed = {family.name for family in text_string_to_metric_families(text)}
    rules = [rule for group in RULES["spec"]["groups"] for rule in group["rules"]]
    assert len(rules) >= 7
    for rule in rules:
        names = set(re.findall(r"gpu_portal_[a-z_]+", rule["expr"]))
        assert names and names <= exposed, (rule["alert"], names - exposed)
        assert rule["for"] and rule["labels"]["severity"] in ("info", "warning", "critical")
        runbook = rule["annotations"]["runbook_url"].split("/blob/main/", 1)[1]
        assert (ROOT / runbook).is_file(), runbook
        text_of = (ROOT / runbook).read_text()
        assert text_of.startswith(f"# {rule['alert']}") and "**Do.**" in text_of


@pytest.mark.parametrize("document", ["monitoring/alerts.yaml", "agent/agent.yaml"])
def test_the_observability_manifests_parse(document):
    assert yaml.safe_load((ROOT / "deploy" / document).read_text())["kind"]


def test_the_grafana_dashboard_reads_only_exposed_metrics(db, settings, fleet):
    import json

    settings.PORTAL_METRICS_TOKEN = "t"
    text = Client().get("/metrics", HTTP_AUTHORIZATION="Bearer t").content.decode()
    exposed = {family.name for family in text_string_to_metric_families(text)}
    dashboard = json.loads((ROOT / "deploy" / "monitoring" / "grafana-dashboard.json").read_text())
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel.get("targets", [])]
    assert len(exprs) >= 10
    for expr in exprs:
        names = set(re.findall(r"gpu_portal_[a-z_]+", expr))
        assert names and names <= exposed, (expr, names - exposed)


def test_the_dashboard_shows_serving_and_the_platforms_slower_figures(db, settings, fleet):
    import json

    settings.PORTAL_METRICS_TOKEN = "t"
    text = Client().get("/metrics", HTTP_AUTHORIZATION="Bearer t").content.decode()
    exposed = {family.name for family in text_string_to_metric_families(text)}
    dashboard = json.loads((ROOT / "deploy" / "monitoring" / "grafana-dashboard.json").read_text())
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    shown = {
        name
        for panel in dashboard["panels"]
        for target in panel.get("targets", [])
        for name in re.findall(r"gpu_portal_[a-z_]+", target["expr"])
    }
    wanted = {name for name in exposed if name.startswith("gpu_portal_serving_")} | {
        "gpu_portal_time_to_running_seconds",
        "gpu_portal_workload_failures",
        "gpu_portal_mig_layout_changes_pending",
        "gpu_portal_mig_layout_change_oldest_seconds",
        "gpu_portal_approval_decision_seconds",
        "gpu_portal_idle_gpu_hours",
        "gpu_portal_team_spend_month_to_date_dollars",
        "gpu_portal_team_budget_dollars",
    }
    assert len(wanted) == 14 and wanted <= shown, wanted - shown
