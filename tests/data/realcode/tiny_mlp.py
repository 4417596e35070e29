"""A tiny MLP on a toy 2-D classification problem: far too small to keep a GPU busy.

python tiny_mlp.py --steps 500            # eager: every step launches ~40 tiny kernels
python tiny_mlp.py --steps 500 --graphs   # the whole step captured once, replayed as a graph
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


def make_spirals(n: int, classes: int = 4, noise: float = 0.1) -> tuple[torch.Tensor, torch.Tensor]:
    labels = torch.arange(n) % classes
    r = torch.rand(n)
    theta = labels * (2 * math.pi / classes) + 4.0 * r + noise * torch.randn(n)
    points = torch.stack([r * torch.cos(theta), r * torch.sin(theta)], dim=1)
    # a few random Fourier features, so the input is wider than 2
    proj = torch.randn(2, 14) * 3.0
    feats = torch.cat([points, torch.sin(points @ proj)], dim=1)
    return feats, labels


def mlp(in_dim: int, width: int, depth: int, out_dim: int) -> nn.Sequential:
    layers: list[nn.Module] = []
    d = in_dim
    for _ in range(depth):
        layers += [nn.Linear(d, width), nn.ReLU()]
        d = width
    layers.append(nn.Linear(d, out_dim))
    return nn.Sequential(*layers)


def capture_train_step(model, optimizer, static_x, static_y, warmup_iters: int = 3):
    """Record forward + backward + optimizer.step into one CUDA graph (the PyTorch docs recipe)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmup_iters):
            optimizer.zero_grad(set_to_none=True)
            F.cross_entropy(model(static_x), static_y).backward()
            optimizer.step()
    torch.cuda.current_stream().wait_stream(side)

    graph = torch.cuda.CUDAGraph()
    optimizer.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph):
        static_loss = F.cross_entropy(model(static_x), static_y)
        static_loss.backward()
        optimizer.step()
    return graph, static_loss


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--depth", type=int, default=4)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--graphs", action="store_true", help="replay the step as a CUDA graph")
    train_utils.add_common_args(parser, steps=200, log_every=50)
    args = train_utils.parse_args(parser, argv)

    train_utils.seed_everything(args.seed)
    device = train_utils.pick_device(args)
    use_graphs = args.graphs and device.type == "cuda"
    if args.graphs and not use_graphs:
        print("note: --graphs needs CUDA; running eagerly on the CPU", file=sys.stderr)

    width = 64 if args.small else args.width
    features, labels = make_spirals(8192)
    features, labels = features.to(device), labels.to(device)
    n_batches = len(labels) // args.batch_size
    model = mlp(features.size(1), width, args.depth, int(labels.max()) + 1).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr, capturable=use_graphs)

    def batch(step: int):
        i = step % n_batches
        sl = slice(i * args.batch_size, (i + 1) * args.batch_size)
        return features[sl], labels[sl]

    if use_graphs:
        static_x, static_y = (t.clone() for t in batch(0))
        graph, static_loss = capture_train_step(model, optimizer, static_x, static_y)

        def train_step(step: int) -> None:
            x, y = batch(step)
            static_x.copy_(x)
            static_y.copy_(y)
            graph.replay()
            if step % args.log_every == 0:
                train_utils.log_metrics(step, static_loss.item())

    else:

        def train_step(step: int) -> None:
            x, y = batch(step)
            optimizer.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            if step % args.log_every == 0:
                train_utils.log_metrics(step, loss.item())

    train_utils.run_training(args, "tiny_mlp", train_step, device)


if __name__ == "__main__":
    main()
