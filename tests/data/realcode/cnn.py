"""CIFAR-style CNN classifier on synthetic images, with CPU-side augmentation in a DataLoader.

python cnn.py                                        # logs loss + accuracy (.item()) every step
python cnn.py --log-every 50 --workers 4 --pin-memory
"""

from __future__ import annotations

import argparse
import os
import sys

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_utils

CIFAR_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR_STD = (0.2470, 0.2435, 0.2616)


class SyntheticImages(Dataset):
    """Noisy copies of one smooth random "prototype" image per class, augmented like CIFAR."""

    def __init__(self, length: int, num_classes: int = 10, size: int = 32, pad: int = 4):
        self.length = length
        self.num_classes = num_classes
        self.size = size
        self.pad = pad
        g = torch.Generator().manual_seed(1234)
        coarse = torch.rand(num_classes, 3, size // 4, size // 4, generator=g)
        self.prototypes = F.interpolate(coarse, size=(size, size), mode="bilinear")
        self.mean = torch.tensor(CIFAR_MEAN).view(3, 1, 1)
        self.std = torch.tensor(CIFAR_STD).view(3, 1, 1)

    def __len__(self) -> int:
        return self.length

    def random_crop(self, img: torch.Tensor) -> torch.Tensor:
        padded = F.pad(img, (self.pad,) * 4, mode="reflect")
        top, left = torch.randint(0, 2 * self.pad + 1, (2,)).tolist()
        return padded[:, top : top + self.size, left : left + self.size]

    def __getitem__(self, idx: int):
        label = idx % self.num_classes
        img = self.prototypes[label] + 0.2 * torch.randn(3, self.size, self.size)
        img = img.clamp_(0.0, 1.0)
        img = self.random_crop(img)
        if torch.rand(()) < 0.5:
            img = img.flip(-1)
        img = (img - self.mean) / self.std
        return img.contiguous(), label


def conv_bn(c_in: int, c_out: int, kernel_size: int = 3, stride: int = 1) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(c_in, c_out, kernel_size, stride=stride, padding=kernel_size // 2, bias=False),
        nn.BatchNorm2d(c_out),
    )


class Residual(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.conv1 = conv_bn(channels, channels)
        self.conv2 = conv_bn(channels, channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.conv1(x))
        return F.relu(x + self.conv2(out))


class Net(nn.Module):
    def __init__(self, num_classes: int = 10, width: int = 64, dropout: float = 0.2):
        super().__init__()
        w = width
        self.stem = conv_bn(3, w)
        self.layer1 = nn.Sequential(conv_bn(w, 2 * w), Residual(2 * w))
        self.layer2 = conv_bn(2 * w, 4 * w)
        self.layer3 = nn.Sequential(conv_bn(4 * w, 8 * w), Residual(8 * w))
        self.fc = nn.Linear(8 * w, num_classes)
        self.dropout = dropout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.stem(x))
        x = F.max_pool2d(F.relu(self.layer1[0](x)), 2)
        x = self.layer1[1](x)
        x = F.max_pool2d(F.relu(self.layer2(x)), 2)
        x = F.max_pool2d(F.relu(self.layer3[0](x)), 2)
        x = self.layer3[1](x)
        x = F.adaptive_avg_pool2d(x, 1)
        x = torch.flatten(x, 1)
        x = F.dropout(x, p=self.dropout, training=self.training)
        return self.fc(x)


def infinite(loader: DataLoader):
    while True:
        yield from loader


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--lr", type=float, default=0.02)
    parser.add_argument("--workers", type=int, default=0, help="DataLoader worker processes")
    parser.add_argument("--pin-memory", action="store_true")
    train_utils.add_common_args(parser, log_every=1)
    args = train_utils.parse_args(parser, argv)

    train_utils.seed_everything(args.seed)
    device = train_utils.pick_device(args)

    batch_size = 16 if args.small else args.batch_size
    width = 16 if args.small else 64
    dataset = SyntheticImages(length=50_000)
    loader = DataLoader(
        dataset,
        batch_size=batch_size,
        shuffle=True,
        drop_last=True,
        num_workers=args.workers,
        pin_memory=args.pin_memory and device.type == "cuda",
        persistent_workers=args.workers > 0,
        generator=torch.Generator().manual_seed(args.seed),
    )
    batches = infinite(loader)

    model = Net(num_classes=dataset.num_classes, width=width).to(device)
    optimizer = torch.optim.SGD(
        model.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-4, nesterov=True
    )
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
    model.train()

    def train_step(step: int) -> None:
        x, y = next(batches)
        x = x.to(device, non_blocking=True)
        y = y.to(device, non_blocking=True)
        logits = model(x)
        loss = criterion(logits, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if step % args.log_every == 0:
            acc = (logits.argmax(1) == y).float().mean().item()
            train_utils.log_metrics(step, loss.item(), acc=acc)

    train_utils.run_training(args, "cnn", train_step, device)


if __name__ == "__main__":
    main()
