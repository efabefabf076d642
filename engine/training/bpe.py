"""A byte-level BPE tokenizer trained with `tokenizers` on the corpus."""

from __future__ import annotations

from collections.abc import Iterable

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from engine.tokenizer import SPECIALS


def train_bpe(texts: Iterable[str], vocab_size: int) -> Tokenizer:
    """Specials first (ids 0..3: EOS, BOS, PAD, MASK), then the 256 bytes, then merges."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer)
    return tok
