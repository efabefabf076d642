from __future__ import annotations

from django.contrib import admin
from django.urls import path

from dashboard import views

urlpatterns = [
    path("health", views.health, name="dashboard-health"),
    path("admin/", admin.site.urls),
]
