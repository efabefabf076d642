"""Roles as Django groups: viewer (read), operator (probe now), staff (add/edit servers, admin).

Built from the collectors models' default permissions, so that no custom permission (and no collectors
migration) is needed: "run a probe now" is `collectors.add_proberun`, "add/edit a server" is
`collectors.add_server` / `collectors.change_server`. The groups are (re)created after every `migrate`
(post_migrate), so a fresh database, the test database and `make run` all have them.
"""

from __future__ import annotations

from typing import Any

VIEWER, OPERATOR, STAFF = "viewer", "operator", "staff"

READ = ["view_server", "view_proberun", "view_probemeasurement", "view_scrape", "view_alert", "view_alertevent"]
# Triage (acknowledge / resolve / false positive, test e-mail) is `change_alert`; a user subscribes
# themself (any reader); plain addresses need `add_subscription` (staff).
ROLE_PERMISSIONS: dict[str, list[str]] = {
    VIEWER: READ,
    OPERATOR: [*READ, "add_proberun", "change_alert"],
    STAFF: [*READ, "add_proberun", "add_server", "change_server", "delete_server", "change_proberun", "change_alert",
            "add_subscription", "delete_subscription", "view_subscription"],
}

# What the views ask for (app_label.codename).
CAN_READ = "collectors.view_server"
CAN_PROBE = "collectors.add_proberun"
CAN_EDIT_SERVERS = ("collectors.add_server", "collectors.change_server")
CAN_TRIAGE_ALERTS = "collectors.change_alert"
CAN_ADD_ADDRESSES = "collectors.add_subscription"


def ensure_roles(**kwargs: Any) -> None:
    """Create the three groups with exactly their permissions; idempotent."""
    from django.contrib.auth.models import Group, Permission

    for role, codenames in ROLE_PERMISSIONS.items():
        group, _ = Group.objects.get_or_create(name=role)
        perms = Permission.objects.filter(content_type__app_label="collectors", codename__in=codenames)
        group.permissions.set(perms)


def grant(user: Any, role: str) -> None:
    """Put a user in one role's group (staff also gets is_staff, which the admin requires)."""
    from django.contrib.auth.models import Group

    ensure_roles()
    user.groups.add(Group.objects.get(name=role))
    if role == STAFF and not user.is_staff:
        user.is_staff = True
        user.save(update_fields=["is_staff"])
