"""A small transformer language model trained with DistributedDataParallel.

    torchrun --standalone --nproc_per_node 2 ddp_train.py --trace-dir DIR [--late-ms 15]

Written the way DDP training scripts are: one process per rank, ``DDP`` around a ModuleList
decoder, AdamW, gradient clipping, the loss averaged over ranks for the log line. With
``--late-ms N`` rank ``--late-rank`` spends N ms more on the host preparing each batch, so it
arrives late at every gradient all-reduce and the other rank waits for it.

The backend is gloo when both ranks share one GPU (NCCL refuses two ranks on one device), else
NCCL (``--backend``). Each rank profiles steps [wait + warmup, wait + warmup + active) with
shapes and stacks and writes its trace through the TensorBoard handler (``rank<N>.*.json.gz``).
What the run did (per step and rank: the late time slept, the step's wall time) goes to
``DIR/facts.rank<N>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler


class Block(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        h = self.norm1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        x = x + self.mlp(self.norm2(x))
        return x


class TinyLM(nn.Module):
    def __init__(self, vocab: int, dim: int, heads: int, layers: int, seq: int):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(torch.zeros(1, seq, dim))
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        mask = torch.triu(torch.full((seq, seq), float("-inf")), diagonal=1)
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens) + self.pos[:, : tokens.shape[1]]
        for block in self.blocks:
            x = block(x, self.mask)
        return self.head(self.norm(x))


def make_batch(args, generator: torch.Generator, device: torch.device, late_s: float):
    tokens = torch.randint(0, args.vocab, (args.batch_size, args.seq + 1), generator=generator)
    if late_s:
        # stands in for a slow host-side step on one rank: augmentation, a checkpoint, I/O
        time.sleep(late_s)
    tokens = tokens.to(device, non_blocking=True)
    return tokens[:, :-1], tokens[:, 1:]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trace-dir", required=True)
    parser.add_argument("--late-ms", type=float, default=0.0)
    parser.add_argument("--late-rank", type=int, default=1)
    parser.add_argument("--backend", choices=["auto", "gloo", "nccl"], default="auto")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--vocab", type=int, default=4096)
    parser.add_argument("--dim", type=int, default=256)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--bucket-mb", type=float, default=4.0)
    args = parser.parse_args()

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    gpus = torch.cuda.device_count()
    backend = args.backend
    if backend == "auto":
        backend = "nccl" if gpus >= world else "gloo"
    if gpus:
        device = torch.device("cuda", local_rank % gpus)
        torch.cuda.set_device(device)
    else:  # a CPU smoke test of the script
        device, backend = torch.device("cpu"), "gloo"
    dist.init_process_group(backend, rank=rank, world_size=world)

    torch.manual_seed(0)
    model = TinyLM(args.vocab, args.dim, args.heads, args.layers, args.seq).to(device)
    model = DDP(model, device_ids=[device.index] if gpus else None, bucket_cap_mb=args.bucket_mb)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    generator = torch.Generator().manual_seed(1234 + rank)
    late_s = args.late_ms / 1e3 if rank == args.late_rank else 0.0

    os.makedirs(args.trace_dir, exist_ok=True)
    prof = profile(
        activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if gpus else []),
        schedule=schedule(wait=2, warmup=1, active=3, repeat=1),
        on_trace_ready=tensorboard_trace_handler(
            args.trace_dir, worker_name=f"rank{rank}", use_gzip=True
        ),
        record_shapes=True,
        with_stack=True,
    )
    steps = []
    with prof:
        for step in range(args.steps):
            begin = time.perf_counter()
            inputs, targets = make_batch(args, generator, device, late_s)
            logits = model(inputs)
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            reported = loss.detach().clone()
            dist.all_reduce(reported)
            if rank == 0:
                print(f"step {step} loss {reported.item() / world:.4f}", flush=True)
            else:
                reported.item()
            wall_ms = (time.perf_counter() - begin) * 1e3
            steps.append({"step": step, "late_ms": late_s * 1e3, "wall_ms": wall_ms})
            prof.step()
    facts = {
        "rank": rank,
        "world_size": world,
        "backend": backend,
        "late_rank": args.late_rank,
        "late_ms_per_step": args.late_ms,
        "profiled_steps": [2 + 1, 2 + 1 + 3],
        "steps": steps,
        "gpu": torch.cuda.get_device_name(device) if gpus else None,
        "torch": torch.__version__,
    }
    with open(os.path.join(args.trace_dir, f"facts.rank{rank}.json"), "w") as handle:
        json.dump(facts, handle, indent=1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
