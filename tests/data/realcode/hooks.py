"""Residual MLP classifier instrumented with backward hooks and a custom autograd Function.

python hooks.py                  # hand-written ScaledGELU autograd.Function (several kernels)
python hooks.py --native-gelu    # F.gelu: one fused kernel each way
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

SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


class ScaledGELU(torch.autograd.Function):
    """scale * gelu(x) (tanh approximation) with a hand-written backward."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, scale: float) -> torch.Tensor:
        inner = SQRT_2_OVER_PI * (x + 0.044715 * x.pow(3))
        t = torch.tanh(inner)
        ctx.save_for_backward(x, t)
        ctx.scale = scale
        return scale * 0.5 * x * (1.0 + t)

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor):
        x, t = ctx.saved_tensors
        d_inner = SQRT_2_OVER_PI * (1.0 + 3 * 0.044715 * x * x)
        grad = 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * d_inner
        return grad_out * grad * ctx.scale, None


class Activation(nn.Module):
    def __init__(self, native: bool, scale: float = 1.0):
        super().__init__()
        self.native = native
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.native:
            return self.scale * F.gelu(x, approximate="tanh")
        return ScaledGELU.apply(x, self.scale)


class ResidualBlock(nn.Module):
    def __init__(self, width: int, expansion: int, native_gelu: bool, dropout: float):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.fc1 = nn.Linear(width, expansion * width)
        self.act = Activation(native_gelu)
        self.fc2 = nn.Linear(expansion * width, width)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.drop(self.fc2(self.act(self.fc1(self.norm(x)))))


class ResMLP(nn.Module):
    def __init__(self, in_dim, width, depth, num_classes, expansion=4, native_gelu=False):
        super().__init__()
        self.stem = nn.Linear(in_dim, width)
        self.blocks = nn.Sequential(
            *[ResidualBlock(width, expansion, native_gelu, dropout=0.1) for _ in range(depth)]
        )
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.stem(x)
        if h.requires_grad:
            # keep the stem's gradient bounded: clip it on the way back
            h.register_hook(lambda g: g.clamp(-1.0, 1.0))
        h = self.blocks(h)
        return self.head(self.norm(h))


class GradNormMonitor:
    """Records the norm of the gradient flowing out of each watched module (stays on the GPU)."""

    def __init__(self):
        self.norms: dict[str, torch.Tensor] = {}
        self.handles = []

    def watch(self, name: str, module: nn.Module) -> None:
        def hook(mod, grad_input, grad_output):
            self.norms[name] = grad_output[0].detach().norm()

        self.handles.append(module.register_full_backward_hook(hook))

    def summary(self) -> dict[str, float]:
        return {name: norm.item() for name, norm in self.norms.items()}

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--native-gelu", action="store_true", help="F.gelu instead of ScaledGELU")
    train_utils.add_common_args(parser)
    args = train_utils.parse_args(parser, argv)

    train_utils.seed_everything(args.seed)
    device = train_utils.pick_device(args)

    in_dim, num_classes = 256, 100
    if args.small:
        batch_size, width, depth = 32, 64, 2
    else:
        batch_size, width, depth = args.batch_size, 1024, 6
    model = ResMLP(in_dim, width, depth, num_classes, native_gelu=args.native_gelu).to(device)

    monitor = GradNormMonitor()
    for i, block in enumerate(model.blocks):
        if i % 2 == 0:
            monitor.watch(f"block{i}", block)
    monitor.watch("head", model.head)

    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    # a fixed random linear "teacher" gives the labels some structure
    teacher = torch.randn(in_dim, num_classes, device=device)
    model.train()

    def train_step(step: int) -> None:
        x = torch.randn(batch_size, in_dim, device=device)
        y = (x @ teacher).argmax(dim=1)
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if step % args.log_every == 0:
            norms = {f"gn_{k}": v for k, v in monitor.summary().items()}
            train_utils.log_metrics(step, loss.item(), **norms)

    train_utils.run_training(args, "hooks", train_step, device)
    monitor.remove()


if __name__ == "__main__":
    main()
