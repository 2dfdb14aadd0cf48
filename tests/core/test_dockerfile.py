"""The portal's image: its Dockerfile installs what `make install` installs, the way the manifests
run it. No base image can be pulled where the tests run, so the build itself is not run here;
`make lint` runs hadolint over the file."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = (ROOT / "Dockerfile").read_text()
MAKEFILE = (ROOT / "Makefile").read_text()


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with line continuations joined and comments dropped."""
    joined = re.sub(r"\\\n\s*", " ", DOCKERFILE)
    found = []
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            found.append((keyword.upper(), rest.strip()))
    return found


def test_both_stages_run_the_python_minor_the_portal_is_built_and_tested_on() -> None:
    bases = [args.split()[0] for keyword, args in instructions() if keyword == "FROM"]
    minor = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert len(bases) == 2 and all(base.startswith(f"python:{minor}-") for base in bases)


def test_it_installs_the_runtime_requirements_as_make_install_does_and_checks_them() -> None:
    runs = " && ".join(args for keyword, args in instructions() if keyword == "RUN")
    assert "pip install -q -r requirements.txt" in MAKEFILE  # make install's own step
    assert "pip install --no-cache-dir -r requirements.txt" in runs
    assert "pip check" in runs and "pip check" in MAKEFILE
    assert "requirements-dev.txt" not in DOCKERFILE  # no test tools in the image
    assert "collectstatic --noinput" in runs  # static files at build time (whitenoise serves them)


def test_it_runs_as_the_uid_and_on_the_port_the_manifests_expect() -> None:
    final = DOCKERFILE.split("FROM ", 2)[2]
    assert "USER 10001" in final and "EXPOSE 8000" in final
    web = next(
        doc
        for doc in yaml.safe_load_all((ROOT / "deploy/kubernetes/web.yaml").read_text())
        if doc and doc["kind"] == "Deployment"
    )
    pod = web["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsUser"] == 10001
    container = pod["containers"][0]
    assert container["ports"][0]["containerPort"] == 8000
    assert container["command"][:2] == ["gunicorn", "portal.wsgi"]
    assert '"gunicorn", "portal.wsgi", "--bind", "0.0.0.0:8000"' in final


def test_the_image_leaves_out_local_state() -> None:
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".git", ".venv", "var", ".env"} <= set(ignored)
