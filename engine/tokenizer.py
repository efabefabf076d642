"""Text ↔ token ids through a Hugging Face `tokenizer.json` (the `tokenizers` library)."""

from __future__ import annotations

from pathlib import Path

from tokenizers import Tokenizer as HFTokenizer

# Special tokens of the tokenizers this project trains; a real checkpoint names its own.
BOS, EOS, PAD, MASK = "<|bos|>", "<|endoftext|>", "<|pad|>", "<|mask|>"
SPECIALS = [EOS, BOS, PAD, MASK]


class Tokenizer:
    def __init__(self, hf: HFTokenizer, *, bos_id: int | None, eos_id: int | None) -> None:
        self.hf = hf
        self.bos_id = bos_id
        self.eos_id = eos_id
        self.special_ids = sorted(i for i, tok in hf.get_added_tokens_decoder().items() if tok.special)

    @classmethod
    def load(cls, directory: str | Path, *, bos_id: int | None = None, eos_id: int | None = None) -> Tokenizer:
        path = Path(directory) / "tokenizer.json"
        if not path.exists():
            raise FileNotFoundError(f"no tokenizer.json in {directory}")
        hf = HFTokenizer.from_file(str(path))
        return cls(
            hf,
            bos_id=bos_id if bos_id is not None else hf.token_to_id(BOS),
            eos_id=eos_id if eos_id is not None else hf.token_to_id(EOS),
        )

    @property
    def vocab_size(self) -> int:
        return self.hf.get_vocab_size()

    def token_id(self, token: str) -> int | None:
        return self.hf.token_to_id(token)

    def encode(self, text: str, *, add_bos: bool = True) -> list[int]:
        ids = self.hf.encode(text, add_special_tokens=False).ids
        return [self.bos_id, *ids] if add_bos and self.bos_id is not None else ids

    def decode(self, ids: list[int]) -> str:
        return self.hf.decode(ids, skip_special_tokens=True)
