"""Settings for the GPU portal, driven by environment variables (see .env.example).

Nothing set means the embedded default: SQLite, an in-memory Celery broker and the simulated
cluster driver.
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import dj_database_url

from portal.core.embedded import DEVELOPMENT_SECRET_KEY, non_loopback_hosts
from portal.core.env import (
    ConfigError,
    env_bool,
    env_choice,
    env_cidrs,
    env_float,
    env_int,
    env_list,
    env_proxy_ssl_header,
    env_str,
    env_volume_source,
)

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("PORTAL_VAR_DIR", str(BASE_DIR / "var")))

DEBUG = env_bool("DEBUG", False)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])
# A form posted from a page older than the sign-in gets the portal's page and the way back.
CSRF_FAILURE_VIEW = "portal.core.views.csrf_failure"
PORTAL_BASE_URL = env_str("PORTAL_BASE_URL", "http://127.0.0.1:8000").rstrip("/")
# The embedded default answers to loopback names only (`make run`); anything else is a deployment,
# which gets the production defaults below (secure cookies, HTTPS, HSTS) and needs its own key.
PORTAL_EMBEDDED = not non_loopback_hosts(ALLOWED_HOSTS)

SECRET_KEY = env_str("SECRET_KEY", "")
if not SECRET_KEY or SECRET_KEY == DEVELOPMENT_SECRET_KEY:
    if env_bool("PORTAL_REQUIRE_SECRET_KEY", False):
        raise ConfigError("SECRET_KEY must be set in production (PORTAL_REQUIRE_SECRET_KEY is on)")
    if not PORTAL_EMBEDDED:
        raise ConfigError(
            "SECRET_KEY must be set: the public development key is for the embedded portal on loopback "
            f"only, and ALLOWED_HOSTS names {', '.join(non_loopback_hosts(ALLOWED_HOSTS))}"
        )
    # A fixed development key keeps sessions valid across restarts of the embedded portal; only
    # `runportal` on a loopback address serves with it (portal/core/embedded.py).
    SECRET_KEY = DEVELOPMENT_SECRET_KEY
elif SECRET_KEY.lower().startswith("change-me"):
    raise ConfigError("SECRET_KEY is still the example's placeholder: set it to a long random string")

# Fields encrypted at rest (a team's Hugging Face token) take their key from SECRET_KEY and this
# salt (django-fernet-encrypted-fields); SECRET_KEY_FALLBACKS keeps old values readable on rotation.
SALT_KEY = env_str("PORTAL_FIELD_SALT", "gpu-portal-encrypted-fields")

# --- HTTPS ------------------------------------------------------------------------------------
# A deployment defaults to HTTPS only (`manage.py check --deploy` passes); the embedded default
# serves plain http on loopback. Behind a TLS-terminating proxy (the Ingress), name the header it
# sets: SECURE_PROXY_SSL_HEADER=X-Forwarded-Proto.
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", not PORTAL_EMBEDDED)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", not PORTAL_EMBEDDED)
# Over https the cookies carry the __Host- prefix: browsers then take them only host-only, Secure,
# for path /, so a sandbox's code served under the same parent domain cannot plant its own for
# the parent domain (cookie tossing: a planted session would sign a visitor in as someone else).
SESSION_COOKIE_NAME = "__Host-sessionid" if SESSION_COOKIE_SECURE else "sessionid"
CSRF_COOKIE_NAME = "__Host-csrftoken" if CSRF_COOKIE_SECURE else "csrftoken"
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", not PORTAL_EMBEDDED)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0 if PORTAL_EMBEDDED else 31_536_000, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", True)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", True)
SECURE_PROXY_SSL_HEADER = env_proxy_ssl_header("SECURE_PROXY_SSL_HEADER")
# Callers inside the cluster speak plain http to the web Service: ingress-nginx's sandbox sign-in
# and endpoint checks (auth-url, or a Gateway's ExternalAuth), the node agents' readings and
# Prometheus.
SECURE_REDIRECT_EXEMPT = [
    r"^auth/sandbox/check$",
    r"^auth/sandbox/gateway/",
    r"^auth/endpoint/check$",
    r"^auth/endpoint/gateway/",
    r"^api/v1/telemetry/readings$",
    r"^metrics$",
]
# How many proxies in front of the portal append to X-Forwarded-For (1 behind the Ingress; 0: none,
# the header is ignored). Per-address rate limits and sign-in lockouts count the client they name.
PORTAL_TRUSTED_PROXY_COUNT = env_int("PORTAL_TRUSTED_PROXY_COUNT", 0, minimum=0)

# --- Browser security -------------------------------------------------------------------------
# A strict Content Security Policy (django-csp): scripts, styles and connections from the portal's
# own origin only, no inline script or style, no eval (htmx is configured for it in base.html), no
# framing. The Swagger UI page relaxes it for its own inline style only (portal/core/docs.py).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "font-src": ["'self'"],
        "connect-src": ["'self'"],
        "frame-ancestors": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "object-src": ["'none'"],
    },
}
X_FRAME_OPTIONS = "DENY"
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "axes",
    "csp",
    "portal.core",
    "portal.accounts",
    "portal.fleet",
    "portal.workloads",
    "portal.sandboxes",
    "portal.approvals",
    "portal.spend",
    "portal.audit",
    "portal.catalog",
    "portal.deployments",
    "portal.demo",
    "portal.observability",
    # The worker side registers its Celery app and its management commands (runportal);
    # listed by name only, portal code never imports it.
    "workers",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "portal.core.middleware.FormAddressVisited",
    # Last, as django-axes asks: it turns a locked-out sign-in into the lockout page.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "portal.urls"
WSGI_APPLICATION = "portal.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "portal.approvals.context_processors.navigation",
            ],
        },
    },
]

_default_db = f"sqlite:///{VAR_DIR / 'portal.sqlite3'}"
if "DATABASE_URL" not in os.environ:
    VAR_DIR.mkdir(parents=True, exist_ok=True)  # SQLite creates the file, not its directory
DATABASES = {"default": dj_database_url.parse(env_str("DATABASE_URL", _default_db), conn_max_age=60)}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Web threads and the in-process worker write to one file: WAL lets readers go on while a
    # writer commits, IMMEDIATE transactions take the write lock up front instead of failing
    # half-way, and the timeout waits for the lock instead of raising "database is locked".
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 30,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
    DATABASES["default"]["ATOMIC_REQUESTS"] = False
    # The spend roll-ups' covering indexes (INCLUDE columns) speed up PostgreSQL; SQLite keeps
    # the key columns and answers the same, so its warning about them is only noise at start-up.
    SILENCED_SYSTEM_CHECKS = ["models.W040"]

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
AUTH_USER_MODEL = "accounts.User"
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "dashboard"
LOGOUT_REDIRECT_URL = "login"

# django-axes first: it refuses a sign-in (the portal's and the admin's) while the username or the
# address it comes from is locked out, before any password is checked.
AUTHENTICATION_BACKENDS = [
    "portal.accounts.backends.SignInLockoutBackend",
    # Passwords, refused while PORTAL_LOCAL_LOGIN is off (but for PORTAL_BREAK_GLASS_USERS).
    "portal.accounts.backends.LocalPasswordBackend",
    # Single sign-on (OpenID Connect): does nothing while PORTAL_OIDC_ISSUER is unset.
    "portal.accounts.oidc.PortalOIDCBackend",
]
# Sign-in lockout: PORTAL_LOGIN_FAILURE_LIMIT failed sign-ins for one username, or from one address,
# each within PORTAL_LOGIN_LOCKOUT_MINUTES of the last, lock it out for that long. A platform admin
# unlocks at once by deleting its row under Axes, Access attempts, in the Django admin.
AXES_FAILURE_LIMIT = env_int("PORTAL_LOGIN_FAILURE_LIMIT", 10, minimum=1)
AXES_COOLOFF_TIME = timedelta(minutes=env_float("PORTAL_LOGIN_LOCKOUT_MINUTES", 15.0, minimum=1.0))
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]
# A successful sign-in does not wipe the count: it would wipe the address's too, and with it the
# failures against other usernames from that address (sign in to your own account, guess on).
AXES_RESET_ON_SUCCESS = False
AXES_LOCKOUT_CALLABLE = "portal.accounts.views.sign_in_locked_out"
AXES_CLIENT_IP_CALLABLE = "portal.core.proxies.client_address"
# API tokens: the longest lifetime one may be given, in days (0: no maximum, and a token asked for
# with no expiry never expires), and what one asked for with no expiry gets (at most the maximum).
PORTAL_TOKEN_MAX_DAYS = env_int("PORTAL_TOKEN_MAX_DAYS", 365, minimum=0)
PORTAL_TOKEN_DEFAULT_DAYS = env_int("PORTAL_TOKEN_DEFAULT_DAYS", 90, minimum=1)

# --- Single sign-on (OpenID Connect, mozilla-django-oidc; docs/sso.md) -----------------------
# Off while PORTAL_OIDC_ISSUER is unset. Endpoints come from the issuer's
# /.well-known/openid-configuration, read at the first sign-in and kept an hour, unless all of
# PORTAL_OIDC_AUTHORIZATION_ENDPOINT, _TOKEN_ENDPOINT and _JWKS_ENDPOINT are given.
PORTAL_OIDC_ISSUER = env_str("PORTAL_OIDC_ISSUER", "").rstrip("/")
PORTAL_OIDC_PROVIDER_NAME = env_str("PORTAL_OIDC_PROVIDER_NAME", "single sign-on")
PORTAL_OIDC_GROUPS_CLAIM = env_str("PORTAL_OIDC_GROUPS_CLAIM", "groups")
PORTAL_OIDC_AUTHORIZATION_ENDPOINT = env_str("PORTAL_OIDC_AUTHORIZATION_ENDPOINT", "")
PORTAL_OIDC_TOKEN_ENDPOINT = env_str("PORTAL_OIDC_TOKEN_ENDPOINT", "")
PORTAL_OIDC_USERINFO_ENDPOINT = env_str("PORTAL_OIDC_USERINFO_ENDPOINT", "")
PORTAL_OIDC_JWKS_ENDPOINT = env_str("PORTAL_OIDC_JWKS_ENDPOINT", "")
PORTAL_OIDC_END_SESSION_ENDPOINT = env_str("PORTAL_OIDC_END_SESSION_ENDPOINT", "")
# Password sign-in on /login/ and /admin/login/; off: single sign-on only, but for the break-glass
# accounts named (comma-separated usernames), for when the identity provider is down.
PORTAL_LOCAL_LOGIN = env_bool("PORTAL_LOCAL_LOGIN", True)
PORTAL_BREAK_GLASS_USERS = env_list("PORTAL_BREAK_GLASS_USERS", [])
if PORTAL_OIDC_ISSUER and not PORTAL_OIDC_ISSUER.startswith(("https://", "http://")):
    raise ConfigError(f"PORTAL_OIDC_ISSUER must be the issuer URL, https://... (got {PORTAL_OIDC_ISSUER!r})")
if not PORTAL_LOCAL_LOGIN and not PORTAL_OIDC_ISSUER:
    raise ConfigError("PORTAL_LOCAL_LOGIN is off but PORTAL_OIDC_ISSUER is unset: nobody could sign in")
OIDC_RP_CLIENT_ID = env_str("PORTAL_OIDC_CLIENT_ID", "")
OIDC_RP_CLIENT_SECRET = env_str("PORTAL_OIDC_CLIENT_SECRET", "")
if PORTAL_OIDC_ISSUER and not OIDC_RP_CLIENT_ID:
    raise ConfigError("PORTAL_OIDC_ISSUER is set: set PORTAL_OIDC_CLIENT_ID (and its secret) too")
OIDC_RP_SCOPES = env_str("PORTAL_OIDC_SCOPES", "openid email profile")
OIDC_RP_SIGN_ALGO = env_str("PORTAL_OIDC_SIGN_ALGO", "RS256")
OIDC_USE_PKCE = True
OIDC_USE_NONCE = True
OIDC_STORE_ID_TOKEN = True  # the hint for the provider's logout
OIDC_TIMEOUT = env_float("PORTAL_OIDC_TIMEOUT_SECONDS", 10.0, minimum=1.0)
OIDC_AUTHENTICATE_CLASS = "portal.accounts.oidc.PortalOIDCAuthenticateView"
OIDC_CALLBACK_CLASS = "portal.accounts.oidc.PortalOIDCCallbackView"

# Where a password is set (the Django admin, createsuperuser): Django's own checks, all of them.
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(env_str("STATIC_ROOT", str(BASE_DIR / "staticfiles")))
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = True

EMAIL_BACKEND = env_str("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "gpu-portal@localhost")
EMAIL_HOST = env_str("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25, minimum=1)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
# Seconds a worker waits on the mail server before the e-mail is tried again later (e-mails are
# sent by workers, never in a request).
EMAIL_TIMEOUT = env_int("EMAIL_TIMEOUT", 10, minimum=1)

# --- REST API -------------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "portal.accounts.authentication.BearerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PAGINATION_CLASS": "portal.core.api.Pagination",
    "PAGE_SIZE": 50,
    "DEFAULT_FILTER_BACKENDS": ["portal.core.api.StrictFilterBackend"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "portal.core.api.exception_handler",
    # DRF's JSON parser, refusing bodies nested too deep to be a request (a 400, not a 500).
    # JSON, and DRF's browsable pages with the one relaxation they need (inline style).
    "DEFAULT_RENDERER_CLASSES": [
        "rest_framework.renderers.JSONRenderer",
        "portal.core.renderers.BrowsableAPIRenderer",
    ],
    "DEFAULT_PARSER_CLASSES": [
        "portal.core.parsers.JSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    # Counted in the "throttle" cache, which every process shares (below).
    "DEFAULT_THROTTLE_CLASSES": [
        "portal.core.throttling.UserRateThrottle",
        "portal.core.throttling.AnonRateThrottle",
    ],
    "NUM_PROXIES": PORTAL_TRUSTED_PROXY_COUNT,
    "DEFAULT_THROTTLE_RATES": {
        "user": env_str("PORTAL_API_RATE", "600/minute"),
        "anon": env_str("PORTAL_API_ANON_RATE", "60/minute"),
    },
}
SPECTACULAR_SETTINGS = {
    "TITLE": "GPU Portal API",
    "DESCRIPTION": "Self-service GPU sandboxes, approvals, fleet and spend.",
    "VERSION": "1.0.0",
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    # Every operation documents the error shape for the statuses it can answer with.
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "portal.core.schema.add_error_responses",
        "portal.core.schema.require_decimal_digits",
    ],
}

# The default cache (the portal keeps nothing of its own there; a library may): Redis in
# production (PORTAL_CACHE_URL=redis://...), each process's memory otherwise.
# API rate limits are counted in the "throttle" cache, and a sandbox sign-in ticket is marked used
# in the "shared" one, so that however many gunicorn workers serve the portal one user has one
# count and a ticket opens one door once: Redis too; without it the database (table
# portal_throttle_cache, made by a migration); the embedded portal's memory only where the
# development key guarantees one process (`runportal` on loopback), which spares every API
# request a write to SQLite.
PORTAL_CACHE_URL = env_str("PORTAL_CACHE_URL", "")
if PORTAL_CACHE_URL and not PORTAL_CACHE_URL.startswith(("redis://", "rediss://")):
    raise ConfigError(f"PORTAL_CACHE_URL must be a redis:// or rediss:// URL (got {PORTAL_CACHE_URL!r})")
_redis_cache = {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": PORTAL_CACHE_URL}
_memory_cache = {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
if PORTAL_CACHE_URL:
    _throttle_cache = {**_redis_cache, "KEY_PREFIX": "throttle"}
    _shared_cache = {**_redis_cache, "KEY_PREFIX": "shared"}
elif SECRET_KEY == DEVELOPMENT_SECRET_KEY:
    _throttle_cache = {**_memory_cache, "LOCATION": "throttle"}
    _shared_cache = {**_memory_cache, "LOCATION": "shared"}
else:
    _throttle_cache = {
        "BACKEND": "django.core.cache.backends.db.DatabaseCache",
        "LOCATION": "portal_throttle_cache",
    }
    _shared_cache = {**_throttle_cache, "KEY_PREFIX": "shared"}
CACHES = {
    "default": _redis_cache if PORTAL_CACHE_URL else _memory_cache,
    "throttle": _throttle_cache,
    "shared": _shared_cache,
}

# --- Jobs -------------------------------------------------------------------------------------
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", "memory://localhost/")
CELERY_RESULT_BACKEND = None
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_IGNORE_RESULT = True
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")

# --- Portal behaviour -----------------------------------------------------------------------
PORTAL_CLUSTER_DRIVER = env_choice("PORTAL_CLUSTER_DRIVER", "simulated", ["simulated", "kubernetes"])
PORTAL_SWEEP_SECONDS = env_float("PORTAL_SWEEP_SECONDS", 30.0, minimum=1.0)
PORTAL_RECONCILE_SECONDS = env_float("PORTAL_RECONCILE_SECONDS", 3.0, minimum=1.0)
# How long a worker holds a workload or a node's MIG layout while it steps it: the work of a worker
# that dies mid-step is taken up again by the re-drive once this has run out. Longer than the
# slowest step against the cluster's API server.
PORTAL_LEASE_SECONDS = env_float("PORTAL_LEASE_SECONDS", 60.0, minimum=5.0)
# Kubernetes clusters: how often GPU nodes are discovered and drift (orphaned namespaces,
# missing objects of running sandboxes) is repaired.
PORTAL_DISCOVERY_SECONDS = env_float("PORTAL_DISCOVERY_SECONDS", 300.0, minimum=10.0)
PORTAL_DRIFT_SECONDS = env_float("PORTAL_DRIFT_SECONDS", 120.0, minimum=10.0)
# Objects the portal made on a cluster that its database does not know (after a restore from an
# older backup): removed only after an admin confirmed, and this long after the confirmation.
PORTAL_ORPHAN_GRACE_MINUTES = env_int("PORTAL_ORPHAN_GRACE_MINUTES", 60, minimum=0)
PORTAL_EXPIRY_WARNING_MINUTES = env_int("PORTAL_EXPIRY_WARNING_MINUTES", 30, minimum=1)
# Webhooks may post to http:// and to private or loopback addresses (development only: SSRF).
PORTAL_WEBHOOK_ALLOW_PRIVATE = env_bool("PORTAL_WEBHOOK_ALLOW_PRIVATE", DEBUG)
PORTAL_MAX_ATTEMPTS = env_int("PORTAL_MAX_ATTEMPTS", 5, minimum=1)
# A queued request waiting longer than this reserves its GPU type: nothing smaller is placed
# past it until it fits (so large requests are not starved by a stream of small ones).
PORTAL_STARVATION_MINUTES = env_float("PORTAL_STARVATION_MINUTES", 15.0, minimum=0.0)
# How a MIG slice is billed and counted against quota: "compute" (compute slices / 7) or
# "memory" (memory slots / 8). Quota always uses the same rule as billing.
PORTAL_MIG_SHARE_RULE = env_choice("PORTAL_MIG_SHARE_RULE", "compute", ["compute", "memory"])
# Simulated cluster: how long a pod takes to start, and a MIG reconfiguration.
PORTAL_SIM_POD_START_SECONDS = env_float("PORTAL_SIM_POD_START_SECONDS", 3.0, minimum=0.0)
PORTAL_SIM_MIG_RECONFIG_SECONDS = env_float("PORTAL_SIM_MIG_RECONFIG_SECONDS", 2.0, minimum=0.0)
# How long GPU telemetry is kept: per-minute rows (charts of recent days), per-hour rows (a year).
PORTAL_TELEMETRY_MINUTE_DAYS = env_int("PORTAL_TELEMETRY_MINUTE_DAYS", 14, minimum=1)
PORTAL_TELEMETRY_HOUR_DAYS = env_int("PORTAL_TELEMETRY_HOUR_DAYS", 400, minimum=1)
# Spend is also rolled up by the hour (and blocks of 2, 4, 8 hours) for the last this many days: a
# report whose range starts or ends within a recent day (the last 30 days, ending now) reads
# hours, not half a day of holds.
PORTAL_SPEND_HOUR_DAYS = env_int("PORTAL_SPEND_HOUR_DAYS", 35, minimum=0)
# Older days keep their blocks of 8 hours for this many days (0: dropped with the hours): an edge
# of a range up to a year long is then at most 4 hours of holds, not 12.
PORTAL_SPEND_8H_DAYS = env_int("PORTAL_SPEND_8H_DAYS", 400, minimum=0)
# Simulated cluster: how often its GPUs are "read" as node agents would (utilization charts).
PORTAL_SIM_TELEMETRY_SECONDS = env_float("PORTAL_SIM_TELEMETRY_SECONDS", 15.0, minimum=1.0)
# Where users reach sandboxes, and the namespace of the ingress controller or gateway that
# carries that traffic (sandbox NetworkPolicies admit ingress from it alone).
PORTAL_ACCESS_BASE_URL = env_str("PORTAL_ACCESS_BASE_URL", "https://sandboxes.gpu.internal")
PORTAL_ACCESS_NAMESPACE = env_str("PORTAL_ACCESS_NAMESPACE", "ingress-nginx")
# The portal's sandbox sign-in check as the ingress controller reaches it inside the cluster
# (ingress-nginx auth-url; a Gateway's ExternalAuth filter calls the same Service).
PORTAL_GATE_AUTH_URL = env_str(
    "PORTAL_GATE_AUTH_URL", "http://gpu-portal-web.gpu-portal.svc.cluster.local:8000/auth/sandbox/check"
)
# Kubernetes driver: home volumes' StorageClass (empty: the cluster default), Pod Security level
# of sandbox namespaces, and where the mig-parted ConfigMap for the GPU Operator lives.
PORTAL_STORAGE_CLASS = env_str("PORTAL_STORAGE_CLASS", "")
PORTAL_POD_SECURITY_LEVEL = env_choice("PORTAL_POD_SECURITY_LEVEL", "restricted", ["restricted", "baseline"])
# Where Triton model repositories given as a path live: one volume source (JSON: `csi` inline,
# or `nfs` under baseline), mounted read-only at PORTAL_MODEL_VOLUME_PATH.
PORTAL_MODEL_VOLUME = env_volume_source("PORTAL_MODEL_VOLUME", pod_security_level=PORTAL_POD_SECURITY_LEVEL)
PORTAL_MODEL_VOLUME_PATH = env_str("PORTAL_MODEL_VOLUME_PATH", "/models").rstrip("/")
if not PORTAL_MODEL_VOLUME_PATH.startswith("/"):
    raise ConfigError("PORTAL_MODEL_VOLUME_PATH must be an absolute path below / (such as /models)")
# Team datasets: where bucket credentials Secrets live, and the CSI driver that mounts NFS exports.
PORTAL_DATASET_NAMESPACE = env_str("PORTAL_DATASET_NAMESPACE", "gpu-portal-datasets")
PORTAL_DATASET_NFS_CSI_DRIVER = env_str("PORTAL_DATASET_NFS_CSI_DRIVER", "nfs.csi.k8s.io")
# The cluster's Prometheus (empty: none): homes' use comes from the kubelet volume stats it scrapes.
PORTAL_PROMETHEUS_URL = env_str("PORTAL_PROMETHEUS_URL", "")
# What Prometheus sends as a bearer token to scrape /metrics (empty: platform admins' sessions only).
PORTAL_METRICS_TOKEN = env_str("PORTAL_METRICS_TOKEN", "")
PORTAL_MIG_CONFIG_MAP = env_str("PORTAL_MIG_CONFIG_MAP", "gpu-portal-mig-parted-config")
PORTAL_MIG_CONFIG_NAMESPACE = env_str("PORTAL_MIG_CONFIG_NAMESPACE", "gpu-operator")
# Where sandboxes may connect, beside DNS (comma-separated CIDRs; private and link-local ranges,
# the cloud metadata endpoint among them, are always cut out; empty: no egress but DNS).
PORTAL_SANDBOX_EGRESS_CIDRS = env_cidrs("PORTAL_SANDBOX_EGRESS_CIDRS", "0.0.0.0/0,::/0")
# How long after writing a MIG config the node is pointed at it: the kubelet's ConfigMap refresh.
PORTAL_MIG_CONFIG_SETTLE_SECONDS = env_float("PORTAL_MIG_CONFIG_SETTLE_SECONDS", 120.0, minimum=0.0)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
        # Every periodic tick is logged at INFO; keep the console for what matters.
        "celery": {"level": env_str("CELERY_LOG_LEVEL", "WARNING")},
        # django-axes: failed sign-ins and lockouts (WARNING), not its every step.
        "axes": {"level": "WARNING"},
        # The embedded server's access log: pages poll every few seconds, so only 4xx (WARNING) and
        # 5xx (ERROR) lines by default; PORTAL_REQUEST_LOG_LEVEL=INFO logs every request.
        "django.server": {"level": env_str("PORTAL_REQUEST_LOG_LEVEL", "WARNING")},
    },
}
