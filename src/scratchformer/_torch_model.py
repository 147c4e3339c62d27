"""The PyTorch twin of ``scratchformer.EncoderModel`` (imported only when torch is wanted)."""

from __future__ import annotations

import torch

from .positional import positional_encoding


class TorchEncoderModel(torch.nn.Module):
    """Embedding + sinusoidal positions + encoder layers (+ final norm) + linear head."""

    def __init__(self, embedding, blocks, final_norm, head):
        super().__init__()
        self.embedding = embedding
        self.blocks = torch.nn.ModuleList(blocks)
        self.final_norm = final_norm
        self.head = head

    def forward(self, tokens):
        n, d_model = tokens.shape[-1], self.embedding.embedding_dim
        pe = torch.from_numpy(positional_encoding(n, d_model))
        x = self.embedding(tokens) + pe.to(self.embedding.weight.dtype)
        for block in self.blocks:
            x = block(x)
        if self.final_norm is not None:
            x = self.final_norm(x)
        return self.head(x)
