"""Probe plans: the JSON stored on a server, its bounds, and the defaults (DESIGN §4).

A plan is plain JSON so that the admin and the API can edit it; `validate_probe_plan` keeps it inside
bounds that a probe can finish within its time limit.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError

DEFAULT_PLAN: dict[str, Any] = {
    "contexts": [64, 1024, 3072, 5120],
    "outputs": [200, 600, 1200],
    "n1": 64,
    "n2": 320,
    "repeats": 3,
    "stream_check": True,
}
# For the tiny CPU model that `make run` registers: seconds, not minutes, per probe.
SMALL_PLAN: dict[str, Any] = {
    "contexts": [64, 256, 1024],
    "outputs": [64, 192],
    "n1": 16,
    "n2": 64,
    "repeats": 2,
    "stream_check": True,
}

MIN_CONTEXT = 16
MAX_CONTEXT = 262_144
MAX_TOKENS = 16_384
MAX_ITEMS = 16
MAX_REPEATS = 10
KEYS = {"contexts", "outputs", "n1", "n2", "repeats", "stream_check"}


def _int_list(
    plan: dict[str, Any], key: str, lower: int, upper: int, errors: list[str], *, allow_empty: bool
) -> None:
    value = plan.get(key, DEFAULT_PLAN[key])
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        errors.append(f"{key} must be a list of integers")
        return
    if not value and not allow_empty:
        errors.append(f"{key} must not be empty")
    if len(value) > MAX_ITEMS:
        errors.append(f"{key} has {len(value)} items; at most {MAX_ITEMS}")
    if any(v < lower or v > upper for v in value):
        errors.append(f"{key} values must be between {lower} and {upper}")


def validate_probe_plan(plan: Any) -> None:
    """Raise ValidationError listing every problem; an empty dict means the defaults."""
    if not isinstance(plan, dict):
        raise ValidationError("the probe plan must be a JSON object")
    errors: list[str] = []
    unknown = sorted(set(plan) - KEYS)
    if unknown:
        errors.append(f"unknown keys: {', '.join(unknown)} (allowed: {', '.join(sorted(KEYS))})")
    # Contexts below 16 tokens leave no room for the per-request salt (engine_client.plan agrees).
    _int_list(plan, "contexts", MIN_CONTEXT, MAX_CONTEXT, errors, allow_empty=False)
    _int_list(plan, "outputs", 1, MAX_TOKENS, errors, allow_empty=True)
    n1, n2 = plan.get("n1", DEFAULT_PLAN["n1"]), plan.get("n2", DEFAULT_PLAN["n2"])
    if not all(isinstance(n, int) and not isinstance(n, bool) for n in (n1, n2)):
        errors.append("n1 and n2 must be integers")
    elif not 1 <= n1 < n2 <= MAX_TOKENS:
        errors.append(f"need 1 <= n1 < n2 <= {MAX_TOKENS} (got n1={n1}, n2={n2})")
    else:
        outputs = plan.get("outputs", DEFAULT_PLAN["outputs"])
        if isinstance(outputs, list) and any(isinstance(o, int) and o <= n1 for o in outputs):
            errors.append(f"outputs must all be longer than n1={n1} (the sweep is two-point too)")
    repeats = plan.get("repeats", DEFAULT_PLAN["repeats"])
    if not isinstance(repeats, int) or isinstance(repeats, bool) or not 1 <= repeats <= MAX_REPEATS:
        errors.append(f"repeats must be an integer from 1 to {MAX_REPEATS}")
    if not isinstance(plan.get("stream_check", True), bool):
        errors.append("stream_check must be true or false")
    if errors:
        raise ValidationError(errors)


def effective_plan(plan: dict[str, Any]) -> dict[str, Any]:
    """The stored plan over the defaults."""
    return {**DEFAULT_PLAN, **plan}
