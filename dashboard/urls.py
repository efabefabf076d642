from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import path

from dashboard.views import (
    alerts,
    assets,
    fleet,
    health,
    login,
    metrics,
    probe_now,
    probe_run,
    server,
    servers_edit,
    subscriptions,
)

urlpatterns = [
    path("health", health.health, name="dashboard-health"),
    path("metrics", metrics.metrics, name="dashboard-metrics"),
    path("login/", login.LoginView.as_view(), name="dashboard-login"),
    path("logout/", auth_views.LogoutView.as_view(), name="dashboard-logout"),
    path("assets/<str:version>/<str:name>", assets.asset, name="dashboard-asset"),
    path("", fleet.fleet, name="dashboard-fleet"),
    path("servers/add/", servers_edit.server_add, name="dashboard-server-add"),
    path("fleet/rows/", fleet.fleet_rows, name="dashboard-fleet-rows"),
    path("servers/<int:server_id>/", server.server_detail, name="dashboard-server"),
    path("servers/<int:server_id>/live/", server.server_live, name="dashboard-server-live"),
    path("servers/<int:server_id>/edit/", servers_edit.server_edit, name="dashboard-server-edit"),
    path("servers/<int:server_id>/probe/", probe_now.probe_now, name="dashboard-probe-now"),
    path("runs/<int:run_id>/", probe_run.probe_run, name="dashboard-run"),
    path("runs/<int:run_id>/status/", probe_run.probe_status, name="dashboard-run-status"),
    path("alerts/", alerts.alerts, name="dashboard-alerts"),
    path("alerts/<int:alert_id>/<str:action>/", alerts.alert_action, name="dashboard-alert-action"),
    path("alerts/test-email/", alerts.test_email, name="dashboard-alert-test-email"),
    path("servers/<int:server_id>/subscribe/", subscriptions.toggle, name="dashboard-subscribe"),
    path("servers/<int:server_id>/subscribers/", subscriptions.add_address, name="dashboard-subscriber-add"),
    path("subscriptions/<int:subscription_id>/remove/", subscriptions.remove_address,
         name="dashboard-subscriber-remove"),
    path("admin/", admin.site.urls),
]
