"""Train a TinyViT (an installed library, `pip install tinyvit`) on random images.

python use_library.py           # TinyViT's default hand-written attention
python use_library.py --sdpa    # TinyViT(use_sdpa=True): F.scaled_dot_product_attention
"""

from __future__ import annotations

import argparse
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_utils
from tinyvit import TinyViT


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--img-size", type=int, default=128)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--sdpa", action="store_true", help="TinyViT(use_sdpa=True)")
    train_utils.add_common_args(parser)
    args = train_utils.parse_args(parser, argv)

    train_utils.seed_everything(args.seed)
    device = train_utils.pick_device(args)

    if args.small:
        batch_size, img_size = 8, 16
        model = TinyViT(img_size=16, dim=64, depth=2, num_heads=4, use_sdpa=args.sdpa)
    else:
        batch_size, img_size = args.batch_size, args.img_size
        model = TinyViT(img_size=img_size, patch_size=4, num_classes=100, use_sdpa=args.sdpa)
    model = model.to(device)

    skip = model.no_weight_decay()
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if p.ndim < 2 or name in skip else decay).append(p)
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.05}, {"params": no_decay, "weight_decay": 0.0}],
        lr=args.lr,
    )
    # bf16 autocast on the GPU (no GradScaler needed for bf16)
    autocast = torch.autocast("cuda", dtype=torch.bfloat16, enabled=device.type == "cuda")
    model.train()

    def train_step(step: int) -> None:
        images = torch.randn(batch_size, 3, img_size, img_size, device=device)
        labels = torch.randint(0, model.num_classes, (batch_size,), device=device)
        with autocast:
            logits = model(images)
        loss = F.cross_entropy(logits.float(), labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if step % args.log_every == 0:
            train_utils.log_metrics(step, loss.item())

    train_utils.run_training(args, "use_library", train_step, device)


if __name__ == "__main__":
    main()
