"""Django settings, read only from environment variables (DESIGN §8; reference: dashboard/README_SECTION.md).

No variables → the embedded default: SQLite and kombu's filesystem broker under SPECTATOR_DATA_DIR.
DATABASE_URL=postgres://… and CELERY_BROKER_URL=redis://… → the production path (CI, docker-compose).
"""

from __future__ import annotations

from pathlib import Path

from dashboard.env import cache_from_url, database_from_url, envbool, envfloat, envint, envlist, envsecret, envstr

BASE_DIR = Path(__file__).resolve().parent.parent
DATA_DIR = Path(envstr("SPECTATOR_DATA_DIR", str(BASE_DIR / "var"))).resolve()

# Checked by dashboard.checks (W001): the default key is only for a local, loopback-only install.
DEFAULT_SECRET_KEY = "spectator-insecure-local-only"
SECRET_KEY = envsecret("SECRET_KEY", DEFAULT_SECRET_KEY)
DEBUG = envbool("DEBUG", False)
ALLOWED_HOSTS = envlist("ALLOWED_HOSTS", ["127.0.0.1", "localhost"])
SITE_ROOT = envstr("SITE_ROOT", "http://127.0.0.1:8000")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "collectors",
    "dashboard",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Static files (the admin's CSS/JS) from STATIC_ROOT, filled by `collectstatic` in the image (prod block).
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # Every page needs a login; /health and the login page opt out with @login_not_required.
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "dashboard.urls"
WSGI_APPLICATION = "dashboard.wsgi.application"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "dashboard.views.assets.asset_urls",
            ]
        },
    }
]

DATABASE_URL = envsecret("DATABASE_URL", f"sqlite:///{DATA_DIR / 'spectator.sqlite3'}")
DATABASES = {"default": database_from_url(DATABASE_URL)}
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # A file, not :memory:, so that a Celery worker started by the integration tests sees the test rows.
    DATABASES["default"]["TEST"] = {"NAME": str(DATA_DIR / "test-spectator.sqlite3")}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

LOGIN_URL = "dashboard-login"
LOGIN_REDIRECT_URL = "dashboard-fleet"
LOGOUT_REDIRECT_URL = "dashboard-login"
AUTH_PASSWORD_VALIDATORS = [{"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"}]
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True
STATIC_URL = "static/"
# `collectstatic` fills it and WhiteNoise serves it; the image keeps it outside the data volume.
STATIC_ROOT = Path(envstr("SPECTATOR_STATIC_ROOT", str(DATA_DIR / "static")))

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": envstr("LOG_LEVEL", "INFO")},
    # One line per request at INFO would drown the workers' logs (a scrape every few seconds).
    "loggers": {"httpx": {"level": "WARNING"}, "httpcore": {"level": "WARNING"}},
}

# --- Monitoring -----------------------------------------------------------------------------------
SPECTATOR_TICK_SECONDS = envint("SPECTATOR_TICK_SECONDS", 10, minimum=1, maximum=3600)
SPECTATOR_PROBE_TIME_LIMIT = envint("SPECTATOR_PROBE_TIME_LIMIT", 1800, minimum=10)
SPECTATOR_SCRAPE_TIME_LIMIT = envint("SPECTATOR_SCRAPE_TIME_LIMIT", 60, minimum=5)
SPECTATOR_RAW_SAMPLE_RETENTION_DAYS = envint("SPECTATOR_RAW_SAMPLE_RETENTION_DAYS", 7, minimum=1)
SPECTATOR_SCRAPE_RETENTION_DAYS = envint("SPECTATOR_SCRAPE_RETENTION_DAYS", 90, minimum=1)
# "auto": a Redis lock when the broker is Redis, a lease row in the database otherwise.
SPECTATOR_LOCK_BACKEND = envstr("SPECTATOR_LOCK_BACKEND", "auto")
# The probe lock is renewed every third of this while its probe runs; a dead worker's lock frees the server
# this long after the worker died, and its run is then marked failed and retried (collectors/FAULTS.md).
SPECTATOR_PROBE_LOCK_TTL = envint("SPECTATOR_PROBE_LOCK_TTL", 60, minimum=3)
# Requests to monitored servers: seconds of silence, and seconds for one whole request (a server that
# trickles bytes never trips the first). A scrape gets at most half the scrape time limit for both.
SPECTATOR_HTTP_READ_TIMEOUT = envint("SPECTATOR_HTTP_READ_TIMEOUT", 300, minimum=1)
SPECTATOR_HTTP_DEADLINE = envint("SPECTATOR_HTTP_DEADLINE", 900, minimum=1)

# --- Regression detection and alert e-mails (collectors/DETECTION.md explains each) --- begin -----
SPECTATOR_DETECT_MAX_PVALUE = envfloat("SPECTATOR_DETECT_MAX_PVALUE", 0.001, minimum=1e-12, maximum=0.5)
SPECTATOR_DETECT_MIN_REL_CHANGE = envfloat("SPECTATOR_DETECT_MIN_REL_CHANGE", 0.03, minimum=0.0, maximum=0.9)
# Decode rate and TTFT only (they move with the host's load; τ does not); defaults to the value above.
SPECTATOR_DETECT_THROUGHPUT_MIN_REL_CHANGE = envfloat(
    "SPECTATOR_DETECT_THROUGHPUT_MIN_REL_CHANGE", SPECTATOR_DETECT_MIN_REL_CHANGE, minimum=0.0, maximum=0.99
)
SPECTATOR_DETECT_MAD_K = envfloat("SPECTATOR_DETECT_MAD_K", 4.0, minimum=0.5, maximum=50)
SPECTATOR_DETECT_BASELINE_WINDOW = envint("SPECTATOR_DETECT_BASELINE_WINDOW", 20, minimum=3)
SPECTATOR_DETECT_BASELINE_MIN_POINTS = envint("SPECTATOR_DETECT_BASELINE_MIN_POINTS", 5, minimum=3)
SPECTATOR_DETECT_CONFIRMATIONS = envint("SPECTATOR_DETECT_CONFIRMATIONS", 1, minimum=1, maximum=5)
SPECTATOR_DETECT_RESOLVE_AFTER = envint("SPECTATOR_DETECT_RESOLVE_AFTER", 2, minimum=1)
SPECTATOR_DETECT_CHANGE_POINT_ALERT_POINTS = envint("SPECTATOR_DETECT_CHANGE_POINT_ALERT_POINTS", 4, minimum=3)
SPECTATOR_DETECT_UNREACHABLE_AFTER = envint("SPECTATOR_DETECT_UNREACHABLE_AFTER", 3, minimum=1)
SPECTATOR_DETECT_TAU_NOT_PAYING = envfloat("SPECTATOR_DETECT_TAU_NOT_PAYING", 1.05, minimum=1.0)
SPECTATOR_DETECT_NOT_PAYING_AFTER = envint("SPECTATOR_DETECT_NOT_PAYING_AFTER", 2, minimum=1)
SPECTATOR_DETECT_STALE_AFTER = envint("SPECTATOR_DETECT_STALE_AFTER", 2, minimum=1)
SPECTATOR_DETECT_SCRAPE_MIN_STEPS = envint("SPECTATOR_DETECT_SCRAPE_MIN_STEPS", 20, minimum=1)
SPECTATOR_NOTIFY_SWEEP_SECONDS = envint("SPECTATOR_NOTIFY_SWEEP_SECONDS", 60, minimum=1)
SPECTATOR_NOTIFY_STUCK_SECONDS = envint("SPECTATOR_NOTIFY_STUCK_SECONDS", 300, minimum=1)
# --- Regression detection and alert e-mails --- end -----------------------------------------------

# --- E-mail (alert notifications: collectors/notify.py) ---------------------------------------------
# No EMAIL_HOST → the console backend: a local install prints alert mails to the worker's log.
EMAIL_HOST = envstr("EMAIL_HOST", "")
EMAIL_BACKEND = envstr(
    "EMAIL_BACKEND",
    "django.core.mail.backends.smtp.EmailBackend" if EMAIL_HOST else "django.core.mail.backends.console.EmailBackend",
)
EMAIL_PORT = envint("EMAIL_PORT", 587 if envbool("EMAIL_USE_TLS", True) else 25, minimum=1, maximum=65535)
EMAIL_USE_TLS = envbool("EMAIL_USE_TLS", True)  # STARTTLS; the usual submission setup on port 587
EMAIL_HOST_USER = envstr("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = envsecret("EMAIL_HOST_PASSWORD", "")
EMAIL_TIMEOUT = envint("EMAIL_TIMEOUT", 20, minimum=1)  # a hung SMTP server must not hold a worker
DEFAULT_FROM_EMAIL = envstr("DEFAULT_FROM_EMAIL", "spectator@localhost")
# Absolute links in e-mails (server page, alert); the site's public address.
SPECTATOR_SITE_URL = envstr("SPECTATOR_SITE_URL", SITE_ROOT).rstrip("/")

# --- Celery ---------------------------------------------------------------------------------------
# One block, read by dashboard/celery.py through config_from_object(namespace="CELERY").
CELERY_BROKER_URL = envsecret("CELERY_BROKER_URL", "filesystem://")
_BROKER_DIR = DATA_DIR / "broker"
if CELERY_BROKER_URL.startswith("filesystem://"):
    # kombu's filesystem transport: one folder shared by web, beat and worker processes; no server.
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_BROKER_DIR / "queue"),
        "data_folder_out": str(_BROKER_DIR / "queue"),
        "control_folder": str(_BROKER_DIR / "control"),
    }
else:
    # Redis: a message not acked within this time is redelivered; longer than the longest probe.
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": SPECTATOR_PROBE_TIME_LIMIT + 600}
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_DEFAULT_QUEUE = envstr("SPECTATOR_CELERY_QUEUE", "spectator")
CELERY_TASK_SERIALIZER = "json"  # JSON only: ids in, never pickled objects
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_IGNORE_RESULT = True  # outcomes are rows (ProbeRun, Scrape), not task results
CELERY_TASK_ACKS_LATE = True  # a worker killed mid-task leaves the message for another worker…
CELERY_TASK_REJECT_ON_WORKER_LOST = True  # …and the run's queued→running claim stops a double run
CELERY_WORKER_PREFETCH_MULTIPLIER = 1  # probes are long: don't let one worker hoard them
CELERY_TASK_SOFT_TIME_LIMIT = SPECTATOR_PROBE_TIME_LIMIT  # per-task limits in collectors/tasks.py
CELERY_TASK_TIME_LIMIT = SPECTATOR_PROBE_TIME_LIMIT + 60
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_BEAT_SCHEDULE_FILENAME = str(DATA_DIR / "celerybeat-schedule")
CELERY_BEAT_SCHEDULE = {
    "tick": {
        "task": "collectors.tasks.tick",
        "schedule": float(SPECTATOR_TICK_SECONDS),
        # A tick that waited longer than one period is stale: the next one covers it.
        "options": {"expires": float(SPECTATOR_TICK_SECONDS)},
    },
    "sweep-notifications": {
        "task": "collectors.tasks.sweep_notifications",
        "schedule": float(SPECTATOR_NOTIFY_SWEEP_SECONDS),
        "options": {"expires": float(SPECTATOR_NOTIFY_SWEEP_SECONDS)},
    },
    "retention": {
        "task": "collectors.tasks.retention",
        "schedule": 3600.0,
        "options": {"expires": 3600.0},
    },
    # Hourly scrape rollups for the long chart ranges (collectors/rollups.py); readers cover any lag.
    "rollup-scrapes": {
        "task": "collectors.tasks.rollup_scrapes",
        "schedule": 300.0,
        "options": {"expires": 300.0},
    },
}

# The embedded default keeps its files here; create the folders once, before anything opens them.
if DATABASES["default"]["ENGINE"].endswith("sqlite3") or CELERY_BROKER_URL.startswith("filesystem://"):
    for _folder in (DATA_DIR, _BROKER_DIR / "queue", _BROKER_DIR / "control"):
        _folder.mkdir(parents=True, exist_ok=True)

# --- Production and security (issue 8; README "Production deployment", "Configuration reference") ---------
# HTTPS: on by default for a public site (DEBUG off and a non-local ALLOWED_HOSTS entry), so a real
# deployment gets secure cookies, HSTS and the HTTPS redirect without asking; `make run` on 127.0.0.1
# stays plain HTTP. TLS is terminated by a reverse proxy that sets X-Forwarded-Proto (README).
_LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1", "[::1]", "testserver"}
_PUBLIC_SITE = not DEBUG and any(host not in _LOCAL_HOSTS for host in ALLOWED_HOSTS)
SPECTATOR_HTTPS = envbool("SPECTATOR_HTTPS", _PUBLIC_SITE)
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = SPECTATOR_HTTPS
SESSION_COOKIE_HTTPONLY = True
SECURE_SSL_REDIRECT = envbool("SECURE_SSL_REDIRECT", SPECTATOR_HTTPS)
SECURE_HSTS_SECONDS = envint("SECURE_HSTS_SECONDS", 31_536_000 if SPECTATOR_HTTPS else 0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = envbool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)  # other sites on the domain: opt in
SECURE_HSTS_PRELOAD = envbool("SECURE_HSTS_PRELOAD", False)
if envbool("SPECTATOR_BEHIND_PROXY", SPECTATOR_HTTPS):
    # The proxy talks plain HTTP to gunicorn and says "https" in this header; without it, every request
    # would look insecure and SECURE_SSL_REDIRECT would loop.
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
# WhiteNoise serves STATIC_ROOT (warning when it is missing): `collectstatic` fills it in the image.
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
# Health checks and Prometheus reach the site from inside its network over plain HTTP, by its local name.
SECURE_REDIRECT_EXEMPT = [r"^health$", r"^metrics$"]
ALLOWED_HOSTS += [host for host in ("127.0.0.1", "localhost") if host not in ALLOWED_HOSTS]
CSRF_TRUSTED_ORIGINS = envlist("CSRF_TRUSTED_ORIGINS", [])
X_FRAME_OPTIONS = "DENY"
SECURE_REFERRER_POLICY = "same-origin"
# The client address for rate limits and the /metrics allowlist: REMOTE_ADDR, or this header when a
# reverse proxy sets it (e.g. X-Real-IP); never trust a header that clients can send straight to gunicorn.
SPECTATOR_CLIENT_IP_HEADER = envstr("SPECTATOR_CLIENT_IP_HEADER", "")

# Monitored hosts (server-side request forgery): empty = any host; otherwise names (exact, or ".example.org"
# for a domain and its subdomains), IP addresses and networks (10.0.0.0/8). Checked by the server form and
# again on every request of a probe or scrape (collectors/hosts.py), after DNS resolution.
SPECTATOR_ALLOWED_SERVER_HOSTS = envlist("SPECTATOR_ALLOWED_SERVER_HOSTS", [])

# Rate limits (dashboard/ratelimit.py): failed logins per username and per client address, manual probes
# per user, each over a fixed window. The counters live in the shared cache below.
SPECTATOR_LOGIN_FAILURES_PER_USER = envint("SPECTATOR_LOGIN_FAILURES_PER_USER", 5, minimum=1)
SPECTATOR_LOGIN_FAILURES_PER_IP = envint("SPECTATOR_LOGIN_FAILURES_PER_IP", 20, minimum=1)
SPECTATOR_LOGIN_WINDOW_SECONDS = envint("SPECTATOR_LOGIN_WINDOW_SECONDS", 900, minimum=1)
SPECTATOR_MANUAL_PROBES_PER_USER = envint("SPECTATOR_MANUAL_PROBES_PER_USER", 10, minimum=1)
SPECTATOR_MANUAL_PROBE_WINDOW_SECONDS = envint("SPECTATOR_MANUAL_PROBE_WINDOW_SECONDS", 3600, minimum=1)

# The cache holds the rate-limit counters, so every web process must share it: Redis when the broker is
# Redis (Django's own backend), else files under SPECTATOR_DATA_DIR (one machine, several processes).
# Its keys are prefixed; never call cache.clear() with the broker's Redis database: it would flush the queue.
CACHE_URL = envsecret("CACHE_URL", CELERY_BROKER_URL if CELERY_BROKER_URL.startswith(("redis://", "rediss://"))
                      else f"file://{DATA_DIR / 'cache'}")
CACHES = {"default": cache_from_url(CACHE_URL, key_prefix=f"spectator:{DATABASES['default']['NAME']}")}

# /metrics of the dashboard itself (collectors/telemetry.py). PROMETHEUS_MULTIPROC_DIR, set for every web
# and worker process (docker-compose, `manage.py run`), makes prometheus-client write each process's values
# to files; /metrics sums every such file under SPECTATOR_METRICS_DIR. Access: a logged-in staff user, a
# client address in SPECTATOR_METRICS_ALLOW_FROM, or `Authorization: Bearer <SPECTATOR_METRICS_TOKEN>`.
SPECTATOR_METRICS_DIR = envstr("SPECTATOR_METRICS_DIR", envstr("PROMETHEUS_MULTIPROC_DIR", ""))
SPECTATOR_METRICS_TOKEN = envsecret("SPECTATOR_METRICS_TOKEN", "")
SPECTATOR_METRICS_ALLOW_FROM = envlist("SPECTATOR_METRICS_ALLOW_FROM", [])
# --- end of the production and security block ----------------------------------------------------------------
