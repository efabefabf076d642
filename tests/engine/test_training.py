"""The training pipeline runs end to end on CPU, and the DFlash objective hides the future."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import torch

from engine.runtime import load_decoder
from engine.sampling import SamplingParams
from engine.training.draft import block_batch, sample_anchors

ROOT = Path(__file__).resolve().parents[2]


def test_it_shows_each_block_only_the_context_before_its_anchor_and_itself() -> None:
    x = torch.arange(100, 112)[None]  # one sequence of 12 tokens
    anchors = torch.tensor([[3, 7]])
    ids, pos, mask = block_batch(x, anchors, block_size=4, mask_id=1)
    assert ids.tolist() == [[103, 1, 1, 1, 107, 1, 1, 1]]  # the anchor token, then MASK
    assert pos.tolist() == [[3, 4, 5, 6, 7, 8, 9, 10]]
    ctx, blocks = mask[0, :, :12], mask[0, :, 12:]
    assert ctx[:4].sum(-1).tolist() == [3] * 4 and not ctx[:4, 3:].any()  # strictly before anchor 3
    assert ctx[4:].sum(-1).tolist() == [7] * 4 and not ctx[4:, 7:].any()
    assert blocks[:4, :4].all() and blocks[4:, 4:].all()  # bidirectional within a block
    assert not blocks[:4, 4:].any() and not blocks[4:, :4].any()  # blocks isolated


def test_it_samples_distinct_anchors_that_leave_room_for_a_block() -> None:
    a = sample_anchors(3, 40, 10, 8, torch.Generator().manual_seed(0))
    assert a.shape == (3, 10)
    assert (a >= 1).all() and (a <= 40 - 8).all()
    assert all(len(set(row)) == 10 for row in a.tolist())


def test_it_puts_about_half_the_anchors_of_a_continuation_row_in_its_generated_part() -> None:
    gen = torch.Generator().manual_seed(0)
    low = torch.tensor([900, 0] * 50)  # 900 prompt tokens then 100 generated; a plain corpus window
    a = sample_anchors(100, 1016, 40, 16, gen, low)
    generated = (a >= 900).float().mean(dim=1)
    assert 0.35 < generated[0::2].mean() < 0.65  # uniform sampling would give 0.1
    assert generated[1::2].mean() < 0.2
    assert all(len(set(row)) == 40 for row in a.tolist()) and (a >= 1).all() and (a <= 1000).all()


def test_it_trains_a_tiny_pair_on_cpu(tmp_path: Path) -> None:
    out = tmp_path / "m"
    cmd = [
        sys.executable,
        "-m",
        "engine.training",
        "--preset",
        "tiny",
        "--out",
        str(out),
        "--device",
        "cpu",
        "--target-steps",
        "3",
        "--draft-steps",
        "3",
        "--onpolicy-prompts",
        "4",
        "--eval-prompts",
        "1",
        "--onpolicy-contexts",
        "32,96",
        "--eval-contexts",
        "300",
    ]
    subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, timeout=300)
    report = json.loads((out / "training.json").read_text())
    assert report["python_version"] and report["corpus_files"] > 0
    assert len(report["draft"]["top1_per_position"]) == 7  # block 8 → depths 1..7
    assert "ddtree B=32" in report["eval"] and (out / "MODEL_CARD.md").exists()
    assert report["onpolicy"]["prompt_tokens"] == [32, 96] and report["draft"]["sequence_lengths"] == [160, 224]
    assert report["eval_by_context"]["300"]["ddtree B=64"] >= 1.0
    # Fine-tuning the drafter just trained, against the same target, on one longer context.
    first = (out / "draft" / "model.safetensors").read_bytes()
    resume = [*cmd[:-4], "--onpolicy-contexts", "128", "--stages", "draft", "--resume-draft", "--eval-contexts", "64"]
    subprocess.run(resume, cwd=ROOT, check=True, capture_output=True, timeout=300)
    again = json.loads((out / "training.json").read_text())
    assert again["onpolicy"]["resumed"] and again["draft"]["sequence_lengths"] == [256]
    assert again["target"] == report["target"]  # the target was kept
    assert (out / "draft" / "model.safetensors").read_bytes() != first
    assert "fine-tuned from the previous drafter" in (out / "MODEL_CARD.md").read_text()
    # A fresh drafter of another shape against the same target: 3 layers reading target layers 0, 1, 3.
    wider = [*cmd[:-4], "--stages", "draft", "--draft-layers", "3", "--draft-target-layers", "3,0,1"]
    wider += ["--eval-contexts", "64"]
    subprocess.run(wider, cwd=ROOT, check=True, capture_output=True, timeout=300)
    shaped = json.loads((out / "training.json").read_text())["draft"]
    assert shaped["layers"] == 3 and shaped["target_layer_ids"] == [0, 1, 3]
    assert "3 layers reading target layers [0, 1, 3]" in (out / "MODEL_CARD.md").read_text()
    decoder = load_decoder(out / "target", out / "draft", device="cpu")
    assert decoder.drafter is not None and decoder.capture == [0, 1, 3]
    params = SamplingParams(max_tokens=6, ignore_eos=True)
    assert len(decoder.generate_text("x = 1\n", params, algorithm="ddtree").tokens) == 6
    bad = subprocess.run([*wider[:-4], "--draft-target-layers", "0,9"], cwd=ROOT, capture_output=True, text=True)
    assert bad.returncode == 2 and "target layer ids must be distinct, in 0..3" in bad.stderr
    decoder = load_decoder(out / "target", out / "draft", device="cpu")
    assert len(decoder.generate_text("def f(x):\n", SamplingParams(max_tokens=5, ignore_eos=True)).tokens) == 5
