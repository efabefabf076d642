"""Training our own models: corpus, tokenizer, target pretraining, on-policy data, DFlash drafter."""
