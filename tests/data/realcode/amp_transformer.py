"""Causal Transformer-encoder LM with mixed precision (autocast + GradScaler) and LR warmup.

python amp_transformer.py            # foreach AdamW: GradScaler.step syncs to check for infs
python amp_transformer.py --fused    # fused AdamW reads found_inf on the GPU, no sync
"""

from __future__ import annotations

import argparse
import math
import os
import sys

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_utils


class LearnedPositionalEmbedding(nn.Module):
    def __init__(self, max_len: int, dim: int, dropout: float = 0.1):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(1, max_len, dim))
        nn.init.trunc_normal_(self.weight, std=0.02)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(x + self.weight[:, : x.size(1)])


class TransformerLM(nn.Module):
    def __init__(
        self,
        vocab_size: int,
        d_model: int = 512,
        nhead: int = 8,
        num_layers: int = 6,
        dim_feedforward: int = 2048,
        max_len: int = 256,
        dropout: float = 0.1,
    ):
        super().__init__()
        self.d_model = d_model
        self.embed = nn.Embedding(vocab_size, d_model)
        self.pos = LearnedPositionalEmbedding(max_len, d_model, dropout)
        layer = nn.TransformerEncoderLayer(
            d_model,
            nhead,
            dim_feedforward,
            dropout,
            activation="gelu",
            batch_first=True,
            norm_first=True,
        )
        self.encoder = nn.TransformerEncoder(
            layer, num_layers, norm=nn.LayerNorm(d_model), enable_nested_tensor=False
        )
        self.head = nn.Linear(d_model, vocab_size)
        mask = nn.Transformer.generate_square_subsequent_mask(max_len)
        self.register_buffer("causal_mask", mask, persistent=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        T = tokens.size(1)
        x = self.pos(self.embed(tokens) * math.sqrt(self.d_model))
        x = self.encoder(x, mask=self.causal_mask[:T, :T], is_causal=True)
        return self.head(x)


def warmup_cosine(warmup_steps: int, total_steps: int, min_ratio: float = 0.1):
    def lr_lambda(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
        return min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * progress))

    return lr_lambda


def sample_batch(corpus: torch.Tensor, batch_size: int, seq_len: int):
    """Random windows of the (on-device) corpus, gathered on the device."""
    starts = torch.randint(0, corpus.numel() - seq_len - 1, (batch_size, 1), device=corpus.device)
    idx = starts + torch.arange(seq_len + 1, device=corpus.device)
    chunk = corpus[idx]
    return chunk[:, :-1], chunk[:, 1:]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=96)
    parser.add_argument("--seq-len", type=int, default=256)
    parser.add_argument("--vocab", type=int, default=8192)
    parser.add_argument("--lr", type=float, default=5e-4)
    parser.add_argument("--fused", action="store_true", help="AdamW(fused=True)")
    train_utils.add_common_args(parser)
    args = train_utils.parse_args(parser, argv)

    train_utils.seed_everything(args.seed)
    device = train_utils.pick_device(args)
    use_cuda = device.type == "cuda"
    amp_dtype = torch.float16 if use_cuda else torch.bfloat16

    if args.small:
        vocab, batch_size, seq_len = 512, 4, 32
        model_kwargs = dict(d_model=64, nhead=4, num_layers=2, dim_feedforward=128)
    else:
        vocab, batch_size, seq_len = args.vocab, args.batch_size, args.seq_len
        model_kwargs = {}
    model = TransformerLM(vocab, max_len=seq_len, **model_kwargs).to(device)
    corpus = torch.randint(vocab, (1_000_000,), device=device)

    optimizer = torch.optim.AdamW(
        model.parameters(), lr=args.lr, weight_decay=0.01, fused=True if args.fused else None
    )
    total_steps = (
        args.steps if not args.time else args.warmup + args.repeats * (args.steps - args.warmup)
    )
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, warmup_cosine(warmup_steps=max(1, total_steps // 10), total_steps=total_steps)
    )
    # A small model's fp16 gradients overflow at the default 2**16, which would skip steps
    scaler = torch.amp.GradScaler("cuda", init_scale=2.0**12, enabled=use_cuda)
    model.train()

    def train_step(step: int) -> None:
        x, y = sample_batch(corpus, batch_size, seq_len)
        with torch.autocast(device_type=device.type, dtype=amp_dtype):
            logits = model(x)
            loss = F.cross_entropy(logits.view(-1, vocab).float(), y.reshape(-1))
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
        scheduler.step()
        if step % args.log_every == 0:
            train_utils.log_metrics(
                step, loss.item(), lr=scheduler.get_last_lr()[0], scale=scaler.get_scale()
            )

    train_utils.run_training(args, "amp_transformer", train_step, device)


if __name__ == "__main__":
    main()
