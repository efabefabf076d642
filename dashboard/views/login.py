"""The login page, with a limit on failed attempts per username and per client address (issue 8).

Only failures count, so a user who types the password right is never slowed down; once either counter
is over its limit, every attempt (even a right password) gets 429 until the window ends, so guessing
cannot go on in the background.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.http import HttpRequest, HttpResponse

from dashboard import ratelimit


def _limits(request: HttpRequest, count: bool) -> list[ratelimit.Limit]:
    check = ratelimit.hit if count else ratelimit.peek
    window = settings.SPECTATOR_LOGIN_WINDOW_SECONDS
    username = str(request.POST.get("username", "")).strip().lower()
    return [
        check("login-user", username, settings.SPECTATOR_LOGIN_FAILURES_PER_USER, window),
        check("login-ip", ratelimit.client_ip(request), settings.SPECTATOR_LOGIN_FAILURES_PER_IP, window),
    ]


class LoginView(auth_views.LoginView):
    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        # Over the limit already (peek: `limit` failures made the window full) → refuse before checking the password.
        full = [lim for lim in _limits(request, count=False) if lim.count >= lim.limit]
        if full:
            wait = max(lim.retry_after_s for lim in full)
            messages.error(request, f"Too many failed logins. Try again in {wait // 60 + 1} minute(s).")
            # An unbound form: a bound one would authenticate while rendering its errors.
            form = self.get_form_class()(request)
            response = self.render_to_response(self.get_context_data(form=form), status=429)
            response["Retry-After"] = str(wait)
            return response
        return super().post(request, *args, **kwargs)

    def form_invalid(self, form: Any) -> HttpResponse:
        _limits(self.request, count=True)
        return super().form_invalid(form)
