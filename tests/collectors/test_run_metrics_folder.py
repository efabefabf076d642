"""`manage.py run` hands its web and worker children one fresh metrics folder, and keeps it from the engine
child (whose own ddtree:* metrics must not show up in the dashboard's /metrics)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from collectors.management.commands.run import share_metrics_folder


def test_it_gives_the_children_a_fresh_folder_under_the_data_dir(settings: Any, tmp_path: Path,
                                                                  monkeypatch: Any) -> None:
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR", raising=False)
    settings.DATA_DIR = tmp_path
    (tmp_path / "metrics").mkdir()
    (tmp_path / "metrics" / "counter_1.db").write_bytes(b"stale")  # a previous run's process
    env = share_metrics_folder()
    assert env == {"PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "metrics")}
    assert list((tmp_path / "metrics").iterdir()) == []
    assert "PROMETHEUS_MULTIPROC_DIR" not in os.environ  # so the engine child, spawned with os.environ, lacks it


def test_it_keeps_a_folder_the_operator_chose_but_not_for_the_engine(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path / "chosen"))
    assert share_metrics_folder() == {"PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "chosen")}
    assert (tmp_path / "chosen").is_dir() and "PROMETHEUS_MULTIPROC_DIR" not in os.environ
