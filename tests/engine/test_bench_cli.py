from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_it_prints_and_writes_tau_speed_and_stage_times(tiny_dirs: tuple[Path, Path], tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    cmd = [
        sys.executable,
        "-m",
        "engine",
        "bench",
        "--model",
        str(tiny_dirs[0]),
        "--draft",
        str(tiny_dirs[1]),
        "--device",
        "cpu",
        "--prompts",
        "2",
        "--max-tokens",
        "24",
        "--budgets",
        "4,16",
        "--json",
        str(out),
    ]
    run = subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, text=True, timeout=120)
    assert "ddtree B=16" in run.stdout
    results = json.loads(out.read_text())["results"]
    assert [r["algorithm"] for r in results] == ["ar", "dflash", "ddtree", "ddtree"]
    for r in results:
        assert r["tokens"] == 48 and r["tokens_per_second"] > 0
        assert set(r["stage_seconds_per_round"]) == {"draft", "tree_build", "verify", "commit"}
        if r["algorithm"] != "ar":
            assert r["identical_to_ar"] == 2 and r["tau"] >= 1


def test_it_rejects_a_bad_budget_with_a_clear_error(tiny_dirs: tuple[Path, Path]) -> None:
    cmd = [
        sys.executable,
        "-m",
        "engine",
        "bench",
        "--model",
        str(tiny_dirs[0]),
        "--draft",
        str(tiny_dirs[1]),
        "--device",
        "cpu",
        "--budgets",
        "0",
    ]
    run = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and "budget must be at least 1" in run.stderr
    bad = subprocess.run([*cmd[:-2], "--lookup", "-1"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "lookup must be an n-gram order in 0..8" in bad.stderr


def test_it_benches_ddtree_with_the_lookup_branch(tiny_dirs: tuple[Path, Path], tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    cmd = [sys.executable, "-m", "engine", "bench", "--model", str(tiny_dirs[0]), "--draft", str(tiny_dirs[1])]
    cmd += ["--device", "cpu", "--prompts", "2", "--max-tokens", "24", "--algorithms", "ar,ddtree", "--budgets", "8"]
    run = subprocess.run([*cmd, "--lookup", "3", "--json", str(out)], cwd=ROOT, check=True, capture_output=True,
                         text=True, timeout=120)  # fmt: skip
    assert "ddtree+lookup3:31 B=8" in run.stdout  # n-gram order 3, the default branch of 31 tokens
    ar, ddtree = json.loads(out.read_text())["results"]
    assert (ar["lookup"], ddtree["lookup"], ddtree["lookup_tokens"]) == (0, 3, 31) and ddtree["identical_to_ar"] == 2
    assert len(ddtree["accept_length_histogram"]) == 32  # a round may commit up to 1 + 31 tokens
    run = subprocess.run([*cmd, "--lookup", "3", "--lookup-tokens", "5", "--json", str(out)], cwd=ROOT, check=True,
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert "ddtree+lookup3:5 B=8" in run.stdout
    ddtree = json.loads(out.read_text())["results"][1]
    assert ddtree["lookup_tokens"] == 5 and ddtree["identical_to_ar"] == 2
    assert len(ddtree["accept_length_histogram"]) == 8  # the drafted block's 8 still bounds it
    bad = subprocess.run([*cmd, "--lookup", "3", "--lookup-tokens", "64"], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)  # fmt: skip
    assert bad.returncode == 2 and "lookup_tokens must be in 1..63, got 64" in bad.stderr


def test_it_profiles_the_ops_of_a_round(tiny_dirs: tuple[Path, Path], tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    cmd = [sys.executable, "-m", "engine", "bench", "--model", str(tiny_dirs[0]), "--draft", str(tiny_dirs[1])]
    cmd += ["--device", "cpu", "--prompts", "1", "--max-tokens", "12", "--budgets", "8", "--algorithms", "ar,ddtree"]
    run = subprocess.run([*cmd, "--profile-kernels", "4", "--json", str(out)], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]
    profiled = json.loads(out.read_text())["kernel_profile"]
    assert [p["label"] for p in profiled] == ["ar", "ddtree B=8"]
    for p in profiled:
        assert p["rounds"] >= 1 and p["launches_per_round"] > 10 and p["us_per_round"] > 0
        assert 1 <= len(p["top"]) <= 4 and all(r["name"] for r in p["top"])
        times = [r["us_per_round"] for r in p["top"]]
        assert times == sorted(times, reverse=True) and sum(times) <= p["us_per_round"] + 1e-6
    assert "op calls (nested ones too) per round" in run.stdout  # the table: PyTorch ops on the CPU
    assert "aten::" in run.stdout
    bad = subprocess.run([*cmd, "--profile-kernels", "-1"], cwd=ROOT, capture_output=True, text=True)
    assert bad.returncode == 2 and "--profile-kernels must be >= 0" in bad.stderr


def test_it_times_the_transformers_baseline_as_a_median_of_passes(tiny_dirs: tuple[Path, Path], tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    cmd = [sys.executable, "-m", "engine", "bench", "--model", str(tiny_dirs[0]), "--draft", str(tiny_dirs[1])]
    cmd += ["--device", "cpu", "--prompts", "1", "--max-tokens", "6", "--algorithms", "ar", "--hf-baseline", "1"]
    cmd += ["--hf-tokens", "6"]
    run = subprocess.run([*cmd, "--hf-repeats", "3", "--json", str(out)], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]
    doc = json.loads(out.read_text())
    hf = doc["hf_baseline"]
    assert doc["meta"]["host_cpu"].endswith("cores)") and "host CPU: " in run.stdout  # the baseline's own speed
    assert hf["repeats"] == 3 and len(hf["tokens_per_second_runs"]) == 3 and hf["tokens"] == 3 * 6
    assert hf["tokens_per_second"] == sorted(hf["tokens_per_second_runs"])[1] > 0
    assert hf["identical_to_ar_prefix"] == 1  # the same weights, greedy, fp32: the same tokens
    assert "median of 3" in run.stdout
    bad = subprocess.run([*cmd, "--hf-repeats", "0"], cwd=ROOT, capture_output=True, text=True)
    assert bad.returncode == 2 and "--hf-repeats must be >= 1" in bad.stderr
