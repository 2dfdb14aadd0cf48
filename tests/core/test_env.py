"""Settings helpers refuse malformed values with a message naming the variable."""

from __future__ import annotations

import pytest

from portal.core.env import (
    ConfigError,
    env_bool,
    env_choice,
    env_cidrs,
    env_float,
    env_int,
    env_list,
    env_volume_source,
)


def test_helpers_read_typed_values(monkeypatch):
    monkeypatch.setenv("X_BOOL", "yes")
    monkeypatch.setenv("X_INT", "42")
    monkeypatch.setenv("X_FLOAT", "2.5")
    monkeypatch.setenv("X_LIST", "a, b,,c")
    assert env_bool("X_BOOL", False) is True
    assert env_int("X_INT", 0) == 42
    assert env_float("X_FLOAT", 0.0) == 2.5
    assert env_list("X_LIST", []) == ["a", "b", "c"]
    assert env_int("X_UNSET_INT", 7) == 7


@pytest.mark.parametrize(
    ("name", "value", "read"),
    [
        ("X_BOOL", "maybe", lambda: env_bool("X_BOOL", False)),
        ("X_INT", "ten", lambda: env_int("X_INT", 0)),
        ("X_INT", "-1", lambda: env_int("X_INT", 0, minimum=0)),
        ("X_FLOAT", "fast", lambda: env_float("X_FLOAT", 0.0)),
        ("X_CHOICE", "docker", lambda: env_choice("X_CHOICE", "simulated", ["simulated", "kubernetes"])),
    ],
)
def test_malformed_values_are_refused_naming_the_variable(monkeypatch, name, value, read):
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError, match=name):
        read()


def test_egress_cidrs_are_checked_when_the_portal_starts(monkeypatch):
    monkeypatch.setenv("EGRESS", "0.0.0.0/0, 169.254.20.10/32 ,::/0")
    assert env_cidrs("EGRESS", "") == ("0.0.0.0/0", "169.254.20.10/32", "::/0")
    monkeypatch.setenv("EGRESS", "10.0.0/8")
    with pytest.raises(ConfigError, match=r"EGRESS: '10\.0\.0/8' is not a CIDR"):
        env_cidrs("EGRESS", "")


def test_a_model_volume_is_one_source_of_a_kind_the_pod_security_level_admits(monkeypatch):
    monkeypatch.delenv("MODELS", raising=False)
    assert env_volume_source("MODELS", pod_security_level="restricted") == {}
    csi = '{"csi": {"driver": "nfs.csi.k8s.io", "volumeAttributes": {"server": "nfs", "share": "/m"}}}'
    monkeypatch.setenv("MODELS", csi)
    assert env_volume_source("MODELS", pod_security_level="restricted")["csi"]["driver"] == "nfs.csi.k8s.io"
    monkeypatch.setenv("MODELS", '{"nfs": {"server": "nfs", "path": "/m"}}')
    assert env_volume_source("MODELS", pod_security_level="baseline") == {
        "nfs": {"server": "nfs", "path": "/m"}
    }
    for value, refusal in (
        ('{"nfs": {"server": "nfs", "path": "/m"}}', "Pod Security 'restricted' refuses nfs volumes"),
        ('{"hostPath": {"path": "/models"}}', "must be one of csi, nfs"),
        ('{"ephemeral": {"volumeClaimTemplate": {}}}', "must be one of csi, nfs"),
        ('{"csi": {}, "nfs": {}}', "must be one volume source"),
        ('{"csi": "nfs"}', "must be one of"),
        ("csi: nfs", "MODELS: not JSON"),
    ):
        monkeypatch.setenv("MODELS", value)
        with pytest.raises(ConfigError, match=refusal):
            env_volume_source("MODELS", pod_security_level="restricted")
