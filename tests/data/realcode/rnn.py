"""Word-level LSTM language model with truncated backpropagation through time.

python rnn.py            # fp32 matmuls in the decoder
python rnn.py --tf32     # TF32 for the (large) tied decoder
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

Hidden = tuple[torch.Tensor, torch.Tensor]


class LSTMLanguageModel(nn.Module):
    def __init__(
        self, vocab_size: int, dim: int, num_layers: int = 2, dropout: float = 0.3, tie=True
    ):
        super().__init__()
        self.dim = dim
        self.num_layers = num_layers
        self.embed = nn.Embedding(vocab_size, dim)
        self.lstm = nn.LSTM(dim, dim, num_layers, dropout=dropout, batch_first=True)
        self.dropout = nn.Dropout(dropout)
        self.decoder = nn.Linear(dim, vocab_size)
        if tie:
            # "Using the Output Embedding to Improve Language Models" (Press & Wolf, 2017)
            self.decoder.weight = self.embed.weight
        nn.init.uniform_(self.embed.weight, -0.1, 0.1)
        nn.init.zeros_(self.decoder.bias)

    def init_hidden(self, batch_size: int, device: torch.device) -> Hidden:
        shape = (self.num_layers, batch_size, self.dim)
        return torch.zeros(shape, device=device), torch.zeros(shape, device=device)

    def forward(self, tokens: torch.Tensor, hidden: Hidden) -> tuple[torch.Tensor, Hidden]:
        emb = self.dropout(self.embed(tokens))
        out, hidden = self.lstm(emb, hidden)
        logits = self.decoder(self.dropout(out))
        return logits, hidden


def repackage_hidden(h):
    """Cut the graph between BPTT windows: keep the values, drop the history."""
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


def make_corpus(vocab_size: int, n_tokens: int) -> torch.Tensor:
    # Zipf-like unigram distribution so the loss actually goes down a bit
    ranks = torch.arange(1, vocab_size + 1, dtype=torch.float)
    probs = 1.0 / ranks
    return torch.multinomial(probs / probs.sum(), n_tokens, replacement=True)


def batchify(data: torch.Tensor, batch_size: int, device: torch.device) -> torch.Tensor:
    n = data.size(0) // batch_size
    return data[: n * batch_size].view(batch_size, n).contiguous().to(device)


def get_batch(source: torch.Tensor, i: int, bptt: int):
    x = source[:, i : i + bptt]
    y = source[:, i + 1 : i + 1 + bptt]
    return x, y


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocab", type=int, default=10_000)
    parser.add_argument("--dim", type=int, default=512)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--bptt", type=int, default=64)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--clip", type=float, default=0.25)
    parser.add_argument("--tf32", action="store_true", help="TF32 matmuls")
    parser.add_argument("--fused", action="store_true", help="Adam(fused=True)")
    train_utils.add_common_args(parser)
    args = train_utils.parse_args(parser, argv)
    train_utils.seed_everything(args.seed)
    device = train_utils.pick_device(args)
    if args.tf32:
        torch.set_float32_matmul_precision("high")  # TF32 tensor cores for fp32 matmuls

    vocab, dim, batch_size, bptt = args.vocab, args.dim, args.batch_size, args.bptt
    if args.small:
        vocab, dim, batch_size, bptt = 1000, 64, 8, 16

    corpus = make_corpus(vocab, 500_000)
    train_data = batchify(corpus, batch_size, device)
    model = LSTMLanguageModel(vocab, dim).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr, fused=args.fused or None)
    model.train()

    state = {"hidden": model.init_hidden(batch_size, device), "pos": 0}

    def train_step(step: int) -> None:
        if state["pos"] + bptt + 1 > train_data.size(1):
            state["pos"] = 0
            state["hidden"] = model.init_hidden(batch_size, device)
        x, y = get_batch(train_data, state["pos"], bptt)
        state["pos"] += bptt

        hidden = repackage_hidden(state["hidden"])
        optimizer.zero_grad()
        logits, hidden = model(x, hidden)
        loss = F.cross_entropy(logits.reshape(-1, vocab), y.reshape(-1))
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        optimizer.step()
        state["hidden"] = hidden

        if step % args.log_every == 0:
            loss_value = loss.item()
            train_utils.log_metrics(
                step, loss_value, ppl=math.exp(loss_value), grad_norm=grad_norm.item()
            )

    train_utils.run_training(args, "rnn", train_step, device)


if __name__ == "__main__":
    main()
