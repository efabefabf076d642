"""Detection tuning from the environment (SPECTATOR_DETECT_*), and what the values change."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured

from collectors.alerts import AlertParams, after_probe_run
from collectors.models import Alert, ProbeRun
from dashboard.env import envfloat
from tests.collectors.detection_helpers import Enqueued, baseline_runs, stored_run
from tests.engine.server.helpers import ROOT


def test_envfloat_reads_checks_and_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("X_RATIO", "0.05")
    assert envfloat("X_RATIO", 0.03) == 0.05
    monkeypatch.setenv("X_RATIO", " ")
    assert envfloat("X_RATIO", 0.03) == 0.03
    for bad, why in (("five", "not a number"), ("nan", "not a finite"), ("2", "above the maximum")):
        monkeypatch.setenv("X_RATIO", bad)
        with pytest.raises(ImproperlyConfigured, match=why):
            envfloat("X_RATIO", 0.03, maximum=1)


def settings_of(**env: str) -> dict[str, Any]:
    code = ("import django, json; django.setup(); from dataclasses import asdict; "
            "from collectors.alerts import AlertParams; print(json.dumps(asdict(AlertParams.from_settings())))")
    full = {**os.environ, "DJANGO_SETTINGS_MODULE": "dashboard.settings", **env}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=full, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    import json

    return json.loads(out.stdout)


def test_the_environment_sets_the_detection_parameters() -> None:
    defaults = settings_of()
    assert defaults == settings_of(SPECTATOR_DETECT_MAD_K="4", SPECTATOR_DETECT_CONFIRMATIONS="1")
    assert (defaults["baseline"]["k"], defaults["change_points"]["max_pvalue"], defaults["confirmations"]) == (
        4.0, 0.001, 1)
    assert defaults["throughput_min_rel_change"] == 0.03  # follows SPECTATOR_DETECT_MIN_REL_CHANGE
    tuned = settings_of(SPECTATOR_DETECT_MAD_K="6", SPECTATOR_DETECT_MIN_REL_CHANGE="0.1",
                        SPECTATOR_DETECT_MAX_PVALUE="0.0001", SPECTATOR_DETECT_CONFIRMATIONS="2",
                        SPECTATOR_DETECT_UNREACHABLE_AFTER="5", SPECTATOR_DETECT_STALE_AFTER="3")
    assert tuned["baseline"]["k"] == 6.0 and tuned["baseline"]["min_rel_change"] == 0.1
    assert tuned["change_points"] == {**defaults["change_points"], "max_pvalue": 0.0001, "min_rel_change": 0.1}
    assert (tuned["confirmations"], tuned["unreachable_after"], tuned["stale_after"]) == (2, 5, 3)
    assert tuned["throughput_min_rel_change"] == 0.1
    assert settings_of(SPECTATOR_DETECT_THROUGHPUT_MIN_REL_CHANGE="0.5")["throughput_min_rel_change"] == 0.5


def test_a_bad_value_stops_start_up_naming_the_variable() -> None:
    code = "import django; django.setup()"
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "dashboard.settings", "SPECTATOR_DETECT_MAD_K": "lots"}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    assert out.returncode != 0 and "SPECTATOR_DETECT_MAD_K='lots' is not a number" in out.stderr


@pytest.mark.django_db
def test_two_confirmations_need_two_agreeing_reprobes(make_server: Any, settings: Any) -> None:
    settings.SPECTATOR_DETECT_CONFIRMATIONS = 2
    server = make_server()
    baseline_runs(server)
    enqueued = Enqueued()
    suspect = stored_run(server, 90.0)
    first = after_probe_run(suspect, enqueue=enqueued).confirmation
    assert first is not None and first.confirms == suspect
    first.delete()
    first = stored_run(server, 90.5, trigger=ProbeRun.Trigger.CONFIRMATION, confirms=suspect)
    ev = after_probe_run(first, enqueue=enqueued)
    assert ev.opened == [] and ev.confirmation is not None and ev.confirmation.confirms == first
    ev.confirmation.delete()
    second = stored_run(server, 89.5, trigger=ProbeRun.Trigger.CONFIRMATION, confirms=first)
    [alert] = after_probe_run(second, enqueue=enqueued).opened
    assert alert.kind == Alert.Kind.THROUGHPUT_REGRESSION
    assert set(alert.confirming_runs.all()) == {suspect, first, second}
    assert len(enqueued) == 2


@pytest.mark.django_db
def test_a_second_reprobe_back_at_baseline_opens_nothing(make_server: Any) -> None:
    server = make_server()
    baseline_runs(server)
    enqueued = Enqueued()
    params = AlertParams(confirmations=2)
    suspect = stored_run(server, 90.0)
    after_probe_run(suspect, enqueue=enqueued, params=params).confirmation.delete()
    first = stored_run(server, 90.5, trigger=ProbeRun.Trigger.CONFIRMATION, confirms=suspect)
    after_probe_run(first, enqueue=enqueued, params=params).confirmation.delete()
    second = stored_run(server, 100.0, trigger=ProbeRun.Trigger.CONFIRMATION, confirms=first)
    ev = after_probe_run(second, enqueue=enqueued, params=params)
    assert ev.opened == [] and ev.confirmation is None and not Alert.objects.exists()


@pytest.mark.django_db
def test_a_throughput_only_minimum_change_spares_tau(make_server: Any) -> None:
    # A host whose load moves decode rates: decode alerts only above 40 %, τ still at the default 3 %.
    server = make_server()
    baseline_runs(server)
    params = AlertParams(throughput_min_rel_change=0.4)
    enqueued = Enqueued()
    suspect = stored_run(server, 70.0, tau=2.4)  # decode −30 %, τ −20 %
    ev = after_probe_run(suspect, enqueue=enqueued, params=params)
    assert [k.quantity for k in ev.suspects] == ["tau"]
    ev.confirmation.delete()
    confirmation = stored_run(server, 70.0, tau=2.4, trigger=ProbeRun.Trigger.CONFIRMATION, confirms=suspect)
    [alert] = after_probe_run(confirmation, enqueue=enqueued, params=params).opened
    assert (alert.kind, alert.quantity) == (Alert.Kind.ACCEPTANCE_REGRESSION, "tau")
