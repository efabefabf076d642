from __future__ import annotations

from django.apps import AppConfig


class CollectorsConfig(AppConfig):
    name = "collectors"
    default_auto_field = "django.db.models.BigAutoField"
