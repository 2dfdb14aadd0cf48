"""A workload's route: its host on the cluster's ingress, behind the portal's check.

A sandbox's web app sits behind the sign-in check (a browser and its gate cookie); a deployment's
endpoint behind the endpoint check (a client's `Authorization: Bearer` serving token, which both
ingress-nginx's auth subrequest and a Gateway's ExternalAuth pass on: neither sends anyone to
sign in, so a refusal reaches the client as 401 or 403).

ingress-nginx asks `auth-url` before every request (a subrequest carrying the browser's cookies
and `X-Original-URL`); on 401 it sends the browser to `auth-signin` with `rd` set to where it was
going. `auth-always-set-cookie` passes the check's Set-Cookie on to the browser: that is how the
gate cookie, host-only, lands on the sandbox's host. A Gateway's ExternalAuth filter (Gateway API
v1.4, experimental channel) sends the request's headers to the portal under a path prefix, and
only a refusal's headers reach the browser: so the portal answers a browser without a cookie
with the redirect to sign in, and a redeemed ticket with a redirect that sets the gate cookie.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from workers.manifests.names import WORKLOAD_NAME, object_meta
from workers.manifests.options import SandboxRoute
from workers.manifests.policy import sandbox_port
from workers.manifests.serving import SERVICE_NAME
from workers.spec import WorkloadSpec

GATEWAY_API = "gateway.networking.k8s.io/v1"
AUTH_SERVICE = "portal-auth"
GATEWAY_AUTH_PATH = "/auth/sandbox/gateway"  # the portal's check under the Gateway's prefix
ENDPOINT_AUTH_PATH = "/auth/endpoint/check"  # the endpoint check, beside the sandbox check
GATEWAY_ENDPOINT_AUTH_PATH = "/auth/endpoint/gateway"
TLS_SECRET = "sandbox-tls"  # noqa: S105 (the name of the wildcard certificate's copy, where the cluster asks for one)
USER_HEADER = "X-Portal-User"  # who the portal let in, for the app to read
WEB_KINDS = ("jupyter", "vscode")


def has_route(spec: WorkloadSpec) -> bool:
    """Deployments and sandboxes with a web app get a route; an ssh sandbox is reached over a TCP
    path instead."""
    return spec.serving is not None or spec.image_kind in WEB_KINDS


def endpoint_auth_url(route: SandboxRoute) -> str:
    """The endpoint check: the sandbox check's Service, at the endpoint check's path."""
    return urlunsplit(urlsplit(route.auth_url)._replace(path=ENDPOINT_AUTH_PATH, query=""))


def _host(spec: WorkloadSpec) -> str:
    return urlsplit(f"//{spec.access_host}").hostname or spec.access_host


def _service_name(spec: WorkloadSpec) -> str:
    return SERVICE_NAME if spec.serving is not None else WORKLOAD_NAME


def ingress_manifest(spec: WorkloadSpec, route: SandboxRoute) -> dict:
    metadata = object_meta(spec, _service_name(spec))
    if spec.serving is not None:
        auth = {"nginx.ingress.kubernetes.io/auth-url": endpoint_auth_url(route)}
    else:
        auth = {
            "nginx.ingress.kubernetes.io/auth-url": route.auth_url,
            "nginx.ingress.kubernetes.io/auth-signin": route.signin_url,
            "nginx.ingress.kubernetes.io/auth-always-set-cookie": "true",
        }
    metadata["annotations"] = {
        **auth,
        "nginx.ingress.kubernetes.io/auth-response-headers": USER_HEADER,
        # notebooks and editors hold websockets open and upload files; a model streams long answers
        "nginx.ingress.kubernetes.io/proxy-read-timeout": "3600",
        "nginx.ingress.kubernetes.io/proxy-send-timeout": "3600",
        "nginx.ingress.kubernetes.io/proxy-body-size": "1g",
    }
    host = _host(spec)
    backend = {"service": {"name": _service_name(spec), "port": {"number": sandbox_port(spec)}}}
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": metadata,
        "spec": {
            "ingressClassName": route.ingress_class,
            # no secretName: the controller serves its default certificate, the wildcard one
            "tls": [{"hosts": [host], "secretName": TLS_SECRET} if route.tls_secret else {"hosts": [host]}],
            "rules": [
                {
                    "host": host,
                    "http": {"paths": [{"path": "/", "pathType": "Prefix", "backend": backend}]},
                }
            ],
        },
    }


def auth_service_manifest(spec: WorkloadSpec, route: SandboxRoute) -> dict:
    """The portal's check as a Service of the sandbox's own namespace, for the ExternalAuth filter."""
    target = urlsplit(route.auth_url)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": object_meta(spec, AUTH_SERVICE),
        "spec": {
            "type": "ExternalName",
            "externalName": target.hostname or "",
            "ports": [{"name": "http", "port": target.port or 80, "protocol": "TCP"}],
        },
    }


def http_route_manifest(spec: WorkloadSpec, route: SandboxRoute) -> dict:
    gateway_namespace, _, gateway_name = route.gateway.rpartition("/")
    parent = {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": gateway_name}
    if gateway_namespace:
        parent["namespace"] = gateway_namespace
    auth_port = urlsplit(route.auth_url).port or 80
    external_auth = {
        "type": "ExternalAuth",
        "externalAuth": {
            "protocol": "HTTP",
            "backendRef": {"name": AUTH_SERVICE, "port": auth_port},
            "http": {
                "path": GATEWAY_AUTH_PATH if spec.serving is None else GATEWAY_ENDPOINT_AUTH_PATH,
                # Authorization (a deployment's serving token) is always sent
                "allowedHeaders": ["Cookie", "X-Forwarded-Proto"],
                "allowedResponseHeaders": [USER_HEADER],
            },
        },
    }
    return {
        "apiVersion": GATEWAY_API,
        "kind": "HTTPRoute",
        "metadata": object_meta(spec, _service_name(spec)),
        "spec": {
            "parentRefs": [parent],
            "hostnames": [_host(spec)],
            "rules": [
                {
                    "matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
                    "filters": [external_auth],
                    "backendRefs": [{"name": _service_name(spec), "port": sandbox_port(spec)}],
                }
            ],
        },
    }


def route_objects(spec: WorkloadSpec, route: SandboxRoute) -> list[dict]:
    """The workload's route objects, applied after its Service."""
    if not has_route(spec):
        return []
    if route.kind == "httproute":
        return [auth_service_manifest(spec, route), http_route_manifest(spec, route)]
    return [ingress_manifest(spec, route)]
