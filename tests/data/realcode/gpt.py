"""A small GPT-style decoder-only language model trained on random tokens.

python gpt.py --size small            # fp32, hand-written attention, foreach AdamW
python gpt.py --sdpa --fused --tf32   # the fast version
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_utils


@dataclass
class GPTConfig:
    vocab_size: int = 8192
    block_size: int = 256
    n_layer: int = 4
    n_head: int = 8
    n_embd: int = 512
    dropout: float = 0.1
    use_sdpa: bool = False


# model config and default batch size per --size; medium is ~4x the FLOPs of small per step
CONFIGS = {
    "small": (dict(n_layer=4, n_head=8, n_embd=512, block_size=256), 16),
    "medium": (dict(n_layer=8, n_head=8, n_embd=512, block_size=256), 36),
    "tiny": (dict(n_layer=2, n_head=4, n_embd=64, block_size=64, vocab_size=512), 4),
}


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        assert cfg.n_embd % cfg.n_head == 0
        self.n_head = cfg.n_head
        self.head_dim = cfg.n_embd // cfg.n_head
        self.dropout = cfg.dropout
        self.use_sdpa = cfg.use_sdpa
        self.qkv = nn.Linear(cfg.n_embd, 3 * cfg.n_embd)
        self.proj = nn.Linear(cfg.n_embd, cfg.n_embd)
        self.attn_drop = nn.Dropout(cfg.dropout)
        self.resid_drop = nn.Dropout(cfg.dropout)
        mask = torch.tril(torch.ones(cfg.block_size, cfg.block_size, dtype=torch.bool))
        self.register_buffer("causal_mask", mask.view(1, 1, cfg.block_size, cfg.block_size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        # (B, T, C) -> (B, n_head, T, head_dim)
        q = q.view(B, T, self.n_head, self.head_dim).transpose(1, 2)
        k = k.view(B, T, self.n_head, self.head_dim).transpose(1, 2)
        v = v.view(B, T, self.n_head, self.head_dim).transpose(1, 2)

        if self.use_sdpa:
            y = F.scaled_dot_product_attention(
                q, k, v, dropout_p=self.dropout if self.training else 0.0, is_causal=True
            )
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(self.head_dim))
            att = att.masked_fill(~self.causal_mask[:, :, :T, :T], float("-inf"))
            att = F.softmax(att, dim=-1)
            att = self.attn_drop(att)
            y = att @ v

        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_drop(self.proj(y))


class MLP(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd)
        self.act = nn.GELU()
        self.proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(self.proj(self.act(self.fc(x))))


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg.n_embd)
        self.attn = CausalSelfAttention(cfg)
        self.ln_2 = nn.LayerNorm(cfg.n_embd)
        self.mlp = MLP(cfg)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


class GPT(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.pos_emb = nn.Embedding(cfg.block_size, cfg.n_embd)
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList([Block(cfg) for _ in range(cfg.n_layer)])
        self.ln_f = nn.LayerNorm(cfg.n_embd)
        self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None):
        seq_len = idx.size(1)
        if seq_len > self.cfg.block_size:
            raise ValueError(f"sequence length {seq_len} > block size {self.cfg.block_size}")
        pos = torch.arange(seq_len, device=idx.device)
        x = self.drop(self.tok_emb(idx) + self.pos_emb(pos))
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss


def configure_optimizer(model: nn.Module, lr: float, weight_decay: float, fused: bool):
    # no weight decay on biases and LayerNorm weights
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    extra = {"fused": True} if fused else {}
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95), **extra)


class RandomTokens:
    """Stands in for a tokenized corpus: a fixed random token stream, sampled nanoGPT-style."""

    def __init__(self, vocab_size: int, n_tokens: int, block_size: int, batch_size: int):
        self.data = torch.randint(vocab_size, (n_tokens,), dtype=torch.long)
        self.block_size = block_size
        self.batch_size = batch_size

    def get_batch(self, device: torch.device):
        ix = torch.randint(len(self.data) - self.block_size - 1, (self.batch_size,))
        x = torch.stack([self.data[i : i + self.block_size] for i in ix.tolist()])
        y = torch.stack([self.data[i + 1 : i + 1 + self.block_size] for i in ix.tolist()])
        if device.type == "cuda":
            x = x.pin_memory().to(device, non_blocking=True)
            y = y.pin_memory().to(device, non_blocking=True)
        return x, y


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=["small", "medium"], default="small")
    parser.add_argument("--batch-size", type=int, help="default: 16 (small), 36 (medium)")
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--sdpa", action="store_true", help="F.scaled_dot_product_attention")
    parser.add_argument("--fused", action="store_true", help="AdamW(fused=True)")
    parser.add_argument("--tf32", action="store_true", help="TF32 matmuls")
    train_utils.add_common_args(parser)
    args = train_utils.parse_args(parser, argv)

    train_utils.seed_everything(args.seed)
    device = train_utils.pick_device(args)
    if args.tf32:
        torch.set_float32_matmul_precision("high")  # TF32 tensor cores for fp32 matmuls

    size = "tiny" if args.small else args.size
    overrides, batch_size = CONFIGS[size]
    if args.batch_size and not args.small:
        batch_size = args.batch_size
    cfg = GPTConfig(**overrides, use_sdpa=args.sdpa)
    model = GPT(cfg).to(device)
    print(f"GPT {size}: {model.num_params() / 1e6:.1f}M parameters", file=sys.stderr)
    optimizer = configure_optimizer(model, args.lr, weight_decay=0.1, fused=args.fused)
    data = RandomTokens(cfg.vocab_size, 200_000, cfg.block_size, batch_size)

    model.train()

    def train_step(step: int) -> torch.Tensor:
        x, y = data.get_batch(device)
        _, loss = model(x, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        if step % args.log_every == 0:
            train_utils.log_metrics(step, loss.item(), lr=optimizer.param_groups[0]["lr"])
        return loss

    if args.time:
        train_utils.run_timed(args, "gpt", train_step, device)
        return

    with train_utils.make_profiler(args) as prof:
        for step in range(args.steps):
            train_step(step)
            prof.step()


if __name__ == "__main__":
    main()
