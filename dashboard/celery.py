"""The one Celery app: configuration from Django settings (the CELERY_* block), tasks autodiscovered
from installed apps (collectors/tasks.py holds `shared_task`s, so collectors never imports dashboard)."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")

app = Celery("dashboard")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
