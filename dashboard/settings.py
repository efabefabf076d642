"""Django settings, read only from environment variables (DESIGN §8; reference: dashboard/README_SECTION.md).

No variables → the embedded default: SQLite and kombu's filesystem broker under SPECTATOR_DATA_DIR.
DATABASE_URL=postgres://… and CELERY_BROKER_URL=redis://… → the production path (CI, docker-compose).
"""

from __future__ import annotations

from pathlib import Path

from dashboard.env import database_from_url, envbool, envfloat, envint, envlist, envsecret, envstr

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
STATIC_ROOT = DATA_DIR / "static"

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
}

# The embedded default keeps its files here; create the folders once, before anything opens them.
if DATABASES["default"]["ENGINE"].endswith("sqlite3") or CELERY_BROKER_URL.startswith("filesystem://"):
    for _folder in (DATA_DIR, _BROKER_DIR / "queue", _BROKER_DIR / "control"):
        _folder.mkdir(parents=True, exist_ok=True)
