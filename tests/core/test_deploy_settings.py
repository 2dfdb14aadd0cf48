"""Settings as a deployment and as the embedded default start with them: `check --deploy` passes
for the production settings of deploy/ (secure cookies, HTTPS, HSTS), the embedded default keeps
plain http on loopback, and the public development key serves nothing but the embedded portal.

Each case starts a fresh interpreter: settings are read once per process."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
KUSTOMIZATION = ROOT / "deploy" / "kubernetes"


def production_env() -> dict[str, str]:
    """The ConfigMap and the Secret template of deploy/kubernetes, with a real key as the Secret's
    instructions make one (the template's placeholder is refused)."""
    config = yaml.safe_load((KUSTOMIZATION / "configmap.yaml").read_text())["data"]
    secret = yaml.safe_load((KUSTOMIZATION / "secret.example.yaml").read_text())["stringData"]
    return {**config, **secret, "SECRET_KEY": secrets.token_urlsafe(50)}


def run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`args` in a fresh interpreter with only `env` (and PATH) set."""
    base = {
        "PATH": os.environ["PATH"],
        "PYTHONDONTWRITEBYTECODE": "1",
        "DJANGO_SETTINGS_MODULE": "portal.settings",
    }
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env={**base, **env}, capture_output=True, text=True, timeout=120
    )


def settings_under(env: dict[str, str], *names: str) -> dict:
    code = f"import json, portal.settings as s; print(json.dumps({{n: getattr(s, n) for n in {names!r}}}))"
    result = run(["-c", code], env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_check_deploy_passes_with_no_warning_for_the_production_settings():
    result = run(["manage.py", "check", "--deploy", "--fail-level", "WARNING"], production_env())

    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues (0 silenced)." in result.stdout


def test_production_defaults_are_https_only():
    values = settings_under(
        production_env(),
        "SESSION_COOKIE_SECURE",
        "CSRF_COOKIE_SECURE",
        "SECURE_SSL_REDIRECT",
        "SECURE_HSTS_SECONDS",
        "SECURE_PROXY_SSL_HEADER",
        "PORTAL_TRUSTED_PROXY_COUNT",
        "SESSION_COOKIE_NAME",
        "CSRF_COOKIE_NAME",
    )

    assert values == {
        "SESSION_COOKIE_SECURE": True,
        "CSRF_COOKIE_SECURE": True,
        "SESSION_COOKIE_NAME": "__Host-sessionid",  # no sandbox under the same domain can plant one
        "CSRF_COOKIE_NAME": "__Host-csrftoken",
        "SECURE_SSL_REDIRECT": True,
        "SECURE_HSTS_SECONDS": 31_536_000,
        "SECURE_PROXY_SSL_HEADER": ["HTTP_X_FORWARDED_PROTO", "https"],
        "PORTAL_TRUSTED_PROXY_COUNT": 1,
    }


def test_each_https_setting_can_be_turned_off_from_the_environment():
    env = {
        **production_env(),
        "SESSION_COOKIE_SECURE": "false",
        "CSRF_COOKIE_SECURE": "false",
        "SECURE_SSL_REDIRECT": "false",
        "SECURE_HSTS_SECONDS": "0",
        "SECURE_PROXY_SSL_HEADER": "",
    }
    values = settings_under(
        env, "SESSION_COOKIE_SECURE", "CSRF_COOKIE_SECURE", "SECURE_SSL_REDIRECT", "SECURE_HSTS_SECONDS",
        "SESSION_COOKIE_NAME", "CSRF_COOKIE_NAME",
    )  # fmt: skip

    assert values == {
        "SESSION_COOKIE_SECURE": False,
        "CSRF_COOKIE_SECURE": False,
        "SESSION_COOKIE_NAME": "sessionid",  # the prefix needs Secure: a browser drops it without
        "CSRF_COOKIE_NAME": "csrftoken",
        "SECURE_SSL_REDIRECT": False,
        "SECURE_HSTS_SECONDS": 0,
    }


def test_the_embedded_default_serves_plain_http_on_loopback():
    values = settings_under(
        {},
        "PORTAL_EMBEDDED",
        "SESSION_COOKIE_SECURE",
        "CSRF_COOKIE_SECURE",
        "SECURE_SSL_REDIRECT",
        "SECURE_HSTS_SECONDS",
    )

    assert values == {
        "PORTAL_EMBEDDED": True,
        "SESSION_COOKIE_SECURE": False,
        "CSRF_COOKIE_SECURE": False,
        "SECURE_SSL_REDIRECT": False,
        "SECURE_HSTS_SECONDS": 0,
    }


def test_the_throttle_cache_is_one_every_process_shares():
    with_redis = settings_under(production_env(), "CACHES")["CACHES"]["throttle"]
    without_redis = {key: value for key, value in production_env().items() if key != "PORTAL_CACHE_URL"}
    with_database = settings_under(without_redis, "CACHES")["CACHES"]["throttle"]
    embedded = settings_under({}, "CACHES")["CACHES"]["throttle"]

    assert with_redis["BACKEND"] == "django.core.cache.backends.redis.RedisCache"
    assert with_redis["LOCATION"] == production_env()["PORTAL_CACHE_URL"]
    assert with_database == {
        "BACKEND": "django.core.cache.backends.db.DatabaseCache",
        "LOCATION": "portal_throttle_cache",
    }
    # `runportal` on loopback, the only server of the development key, is one process
    assert embedded["BACKEND"] == "django.core.cache.backends.locmem.LocMemCache"


def test_the_lockout_limits_come_from_the_environment():
    env = {"PORTAL_LOGIN_FAILURE_LIMIT": "5", "PORTAL_LOGIN_LOCKOUT_MINUTES": "30"}
    code = "import portal.settings as s; print(s.AXES_FAILURE_LIMIT, s.AXES_COOLOFF_TIME.total_seconds())"

    assert run(["-c", code], env).stdout.split() == ["5", "1800.0"]


@pytest.mark.parametrize(
    "env",
    [
        {"ALLOWED_HOSTS": "portal.example.com"},
        {"ALLOWED_HOSTS": "*"},
        {"ALLOWED_HOSTS": "127.0.0.1,portal.example.com", "DEBUG": "true"},
        {"PORTAL_REQUIRE_SECRET_KEY": "true"},
        {"ALLOWED_HOSTS": "portal.example.com", "SECRET_KEY": "embedded-development-key-not-for-production"},
    ],
    ids=["a public host", "any host", "debug on", "a key required", "the development key given"],
)
def test_without_a_key_of_its_own_a_deployment_refuses_to_start(env):
    result = run(["-c", "import portal.settings"], env)

    assert result.returncode != 0
    assert "SECRET_KEY must be set" in result.stderr


def test_the_example_placeholder_key_is_refused():
    result = run(
        ["-c", "import portal.settings"],
        {**production_env(), "SECRET_KEY": "CHANGE-ME-to-50-random-characters"},
    )

    assert result.returncode != 0
    assert "SECRET_KEY is still the example's placeholder" in result.stderr


def test_gunicorn_refuses_the_development_key():
    """portal.wsgi is what gunicorn (and any WSGI server) loads; the embedded key never serves there."""
    refused = run(["-c", "import portal.wsgi"], {})
    served = run(["-c", "import portal.wsgi"], {"SECRET_KEY": secrets.token_urlsafe(50)})

    assert refused.returncode != 0
    assert "public development key is for the embedded portal on loopback" in refused.stderr
    assert served.returncode == 0, served.stderr


def test_runportal_refuses_to_serve_the_development_key_beyond_loopback(tmp_path):
    result = run(["manage.py", "runportal", "0.0.0.0:8000"], {"PORTAL_VAR_DIR": str(tmp_path)})

    assert result.returncode != 0
    assert "serves on loopback only, not on '0.0.0.0'" in result.stderr


@pytest.mark.parametrize(
    ("addrport", "address"),
    [("8000", "127.0.0.1"), ("127.0.0.1:8000", "127.0.0.1"), ("[::1]:8000", "[::1]"), ("0:8000", "0.0.0.0")],
)
def test_runportal_reads_the_address_it_binds(addrport, address):
    from workers.management.commands.runportal import bind_address

    assert bind_address(addrport) == address


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.0.1.1", True),
        ("localhost", True),
        ("[::1]", True),
        ("::1", True),
        ("testserver", True),
        ("0.0.0.0", False),
        ("10.0.0.1", False),
        ("portal.example.com", False),
        ("*", False),
        (".localhost", False),
    ],
)
def test_which_hosts_count_as_loopback(host, loopback):
    from portal.core.embedded import is_loopback

    assert is_loopback(host) is loopback
