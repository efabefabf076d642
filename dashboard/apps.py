from __future__ import annotations

from django.apps import AppConfig
from django.db.models.signals import post_migrate


class DashboardConfig(AppConfig):
    name = "dashboard"

    def ready(self) -> None:
        from dashboard import checks  # noqa: F401  (registers the system checks)
        # After every migrate. Django sends post_migrate only for apps with models (not this one), so listen
        # to collectors'; contrib.auth connected its permission-creating receiver earlier, so it runs first.
        post_migrate.connect(_roles_after_collectors, dispatch_uid="dashboard.ensure_roles")


def _roles_after_collectors(sender: AppConfig, **kwargs: object) -> None:
    if sender.label == "collectors":
        from dashboard.roles import ensure_roles

        ensure_roles()
