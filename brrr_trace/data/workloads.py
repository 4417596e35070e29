"""Fixture workloads whose GPU traces are committed under ``tests/data/h200/``.

Each workload is written the way a user would write it: one statement per line, no helper that
hides the tensor ops, so that the analyzer can map every kernel back to a line of this file.
A hot line ends with a comment ``expect: compute|memory|overhead``, the regime it should show.
Tests read those comments and assert line numbers, so moving a line means re-recording the traces
(see ``FIXTURES.md``). Appending to the end of the file is safe; editing the comment at the end of a
line is safe too (the traces only name this file and the ``def`` lines of its functions).

Every workload takes ``device`` and ``scale`` (1.0 = the size recorded on the H200, smaller for a
CPU smoke test) and ``steps`` (how many times the hot loop runs; the defaults are what was
recorded). ``batch`` multiplies the batch dimension for the batch-size scaling fixtures.
"""

from __future__ import annotations

import time

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset


def bf16_matmul(
    device: torch.device, scale: float = 1.0, steps: int = 10, batch: int = 1
) -> torch.Tensor:
    n = int(8192 * scale)
    a = torch.randn(n * batch, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    for _ in range(steps):
        c = a @ b  # expect: compute
    return c


def fp32_matmul(device: torch.device, scale: float = 1.0, steps: int = 5) -> torch.Tensor:
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    n = int(8192 * scale)
    a = torch.randn(n, n, device=device)
    b = torch.randn(n, n, device=device)
    for _ in range(steps):
        c = a @ b  # expect: compute
    return c


def fp32_matmul_tf32(device: torch.device, scale: float = 1.0, steps: int = 5) -> torch.Tensor:
    torch.set_float32_matmul_precision("high")
    n = int(8192 * scale)
    a = torch.randn(n, n, device=device)
    b = torch.randn(n, n, device=device)
    for _ in range(steps):
        c = a @ b  # expect: compute
    return c


def chain_ops(x: torch.Tensor) -> torch.Tensor:
    y = x * 2  # expect: memory
    z = y + 1  # expect: memory
    w = z.sin()  # expect: memory
    v = w * w  # expect: memory
    u = v * 2 + 1  # expect: memory
    return u.relu()  # expect: memory


compiled_chain_ops = torch.compile(chain_ops)


def elementwise_chain(device: torch.device, scale: float = 1.0, steps: int = 10) -> torch.Tensor:
    x = torch.randn(int(2**28 * scale), device=device)
    for _ in range(steps):
        out = chain_ops(x)  # expect: memory
    return out


def elementwise_chain_compiled(
    device: torch.device, scale: float = 1.0, steps: int = 10
) -> torch.Tensor:
    x = torch.randn(int(2**28 * scale), device=device)
    for _ in range(steps):
        out = compiled_chain_ops(x)  # expect: memory
    return out


def tiny_op_loop(
    device: torch.device, scale: float = 1.0, steps: int = 500, batch: int = 1
) -> torch.Tensor:
    x = torch.zeros(16 * batch, device=device)
    for _ in range(steps):
        x = x + 1  # expect: overhead
    return x


def small_matmul_loop(device: torch.device, scale: float = 1.0, steps: int = 300) -> torch.Tensor:
    a = torch.randn(64, 64, device=device)
    b = torch.randn(64, 64, device=device)
    for _ in range(steps):
        c = a @ b  # expect: overhead
    return c


def item_in_loop(device: torch.device, scale: float = 1.0, steps: int = 100) -> float:
    n = int(3072 * scale)
    x = torch.randn(2 * n, n, device=device, dtype=torch.bfloat16)
    w = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    total = 0.0
    for _ in range(steps):
        loss = (x @ w).sum()  # expect: compute
        total += loss.item()  # expect: overhead
    return total


def item_in_loop_fixed(device: torch.device, scale: float = 1.0, steps: int = 100) -> float:
    n = int(3072 * scale)
    x = torch.randn(2 * n, n, device=device, dtype=torch.bfloat16)
    w = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    total = torch.zeros((), device=device)
    for _ in range(steps):
        loss = (x @ w).sum()  # expect: compute
        total += loss
    return total.item()


def pageable_copy(device: torch.device, scale: float = 1.0, steps: int = 10) -> torch.Tensor:
    x_cpu = torch.ones(int(2**26 * scale))
    for _ in range(steps):
        x_gpu = x_cpu.to(device)  # expect: memory
    return x_gpu


def pinned_copy(device: torch.device, scale: float = 1.0, steps: int = 10) -> torch.Tensor:
    x_cpu = torch.ones(int(2**26 * scale)).pin_memory()
    for _ in range(steps):
        x_gpu = x_cpu.to(device, non_blocking=True)  # expect: memory
    return x_gpu


class SlowDataset(Dataset[torch.Tensor]):
    """A dataset whose items take 2 ms each to produce (think: decoding an image)."""

    def __init__(self, length: int, dim: int) -> None:
        self.length = length
        self.dim = dim

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> torch.Tensor:
        time.sleep(0.002)
        return torch.full((self.dim,), float(index))


def dataloader_slow(device: torch.device, scale: float = 1.0, steps: int = 40) -> torch.Tensor:
    dim = int(4096 * scale)
    dataset = SlowDataset(steps * 4, dim)
    loader = DataLoader(dataset, batch_size=4, num_workers=0)
    model = nn.Linear(dim, dim, device=device)
    for batch in loader:  # expect: overhead
        x = batch.to(device)
        y = model(x)
    return y


def dataloader_workers(device: torch.device, scale: float = 1.0, steps: int = 40) -> torch.Tensor:
    dim = int(4096 * scale)
    dataset = SlowDataset(steps * 4, dim)
    loader = DataLoader(
        dataset, batch_size=4, num_workers=4, pin_memory=True, persistent_workers=True
    )
    model = nn.Linear(dim, dim, device=device)
    for batch in loader:  # expect: overhead
        x = batch.to(device, non_blocking=True)
        y = model(x)
    return y


def optimizer_foreach_false(
    device: torch.device, scale: float = 1.0, steps: int = 3
) -> torch.Tensor:
    dim = int(256 * scale)
    model = nn.Sequential(*[nn.Linear(dim, dim) for _ in range(50)]).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=False)
    x = torch.randn(64, dim, device=device)
    for _ in range(steps):
        loss = model(x).square().mean()
        loss.backward()
        opt.step()  # expect: overhead
        opt.zero_grad()
    return loss


def optimizer_fused(device: torch.device, scale: float = 1.0, steps: int = 3) -> torch.Tensor:
    dim = int(256 * scale)
    model = nn.Sequential(*[nn.Linear(dim, dim) for _ in range(50)]).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, fused=True)
    x = torch.randn(64, dim, device=device)
    for _ in range(steps):
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
    return loss


@torch.compile
def bias_gelu(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    return F.gelu(x + bias)


def compiled_pointwise(device: torch.device, scale: float = 1.0, steps: int = 20) -> torch.Tensor:
    n = int(8192 * scale)
    x = torch.randn(4 * n, n, device=device, dtype=torch.bfloat16)
    bias = torch.randn(n, device=device, dtype=torch.bfloat16)
    for _ in range(steps):
        y = bias_gelu(x, bias)  # expect: memory
    return y


def cuda_graph_replay(device: torch.device, scale: float = 1.0, steps: int = 100) -> torch.Tensor:
    x = torch.randn(int(2**24 * scale), device=device)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = x * 2
        z = y + 1
        w = z.sin()
        v = w * w
        u = v.relu()
    for _ in range(steps):
        graph.replay()  # expect: memory
    return u


def manual_attention(device: torch.device, scale: float = 1.0, steps: int = 20) -> torch.Tensor:
    seq = int(2048 * scale)
    q = torch.randn(4, 16, seq, 64, device=device, dtype=torch.bfloat16)
    k = torch.randn(4, 16, seq, 64, device=device, dtype=torch.bfloat16)
    v = torch.randn(4, 16, seq, 64, device=device, dtype=torch.bfloat16)
    softmax_scale = 64**-0.5
    for _ in range(steps):
        scores = q @ k.transpose(-2, -1) * softmax_scale  # expect: memory
        probs = scores.softmax(-1)  # expect: memory
        out = probs @ v  # expect: memory
    return out


def sdpa_attention(device: torch.device, scale: float = 1.0, steps: int = 20) -> torch.Tensor:
    seq = int(2048 * scale)
    q = torch.randn(4, 16, seq, 64, device=device, dtype=torch.bfloat16)
    k = torch.randn(4, 16, seq, 64, device=device, dtype=torch.bfloat16)
    v = torch.randn(4, 16, seq, 64, device=device, dtype=torch.bfloat16)
    for _ in range(steps):
        out = F.scaled_dot_product_attention(q, k, v)  # expect: compute
    return out


class Block(nn.Module):
    """A pre-norm transformer block, written out op by op."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        h = self.norm1(x)
        qkv = self.qkv(h)
        qkv = qkv.view(b, t, 3, self.heads, d // self.heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        a = a.transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(a)
        h = self.norm2(x)
        h = F.gelu(self.fc1(h))
        x = x + self.fc2(h)
        return x


def transformer_step(
    device: torch.device,
    scale: float = 1.0,
    steps: int = 4,
    prof: torch.profiler.profile | None = None,
) -> torch.Tensor:
    dim = int(1024 * scale)
    seq = int(512 * scale)
    vocab = 8192
    model = nn.Sequential(
        nn.Embedding(vocab, dim),
        Block(dim, heads=8),
        Block(dim, heads=8),
        nn.LayerNorm(dim),
        nn.Linear(dim, vocab),
    ).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    tokens = torch.randint(0, vocab, (8, seq + 1), device=device)
    inputs = tokens[:, :-1]
    targets = tokens[:, 1:]
    for _ in range(steps):
        with torch.autocast(device.type, dtype=torch.bfloat16):
            logits = model(inputs)
            loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
        loss.backward()
        opt.step()
        opt.zero_grad()
        if prof is not None:
            prof.step()
    return loss


def sample(device: torch.device, scale: float = 1.0, steps: int = 4) -> float:
    n = int(4096 * scale)
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    x = torch.randn(int(2**26 * scale), device=device)
    t = torch.zeros(16, device=device)
    total = 0.0
    for _ in range(steps):
        c = a @ b  # expect: compute
        y = (x * 2 + 1).sin()  # expect: memory
        total += y[0].item() + c[0, 0].item()  # expect: overhead
        for _ in range(50):
            t = t + 1  # expect: overhead
    return total


def cpu_tensor_each_step(device: torch.device, scale: float = 1.0, steps: int = 10) -> torch.Tensor:
    n = int(2048 * scale)
    w = torch.zeros(n, n, device=device)
    for _ in range(steps):
        noise = torch.randn(n, n).to(device)  # expect: overhead
        w = w + noise  # expect: overhead (launched as the blocking copy above returns)
    return w


def device_tensor_each_step(
    device: torch.device, scale: float = 1.0, steps: int = 10
) -> torch.Tensor:
    n = int(2048 * scale)
    w = torch.zeros(n, n, device=device)
    for _ in range(steps):
        noise = torch.randn(n, n, device=device)  # expect: overhead (its first call: FIXTURES.md)
        w = w + noise  # expect: memory
    return w


def misaligned_matmul(device: torch.device, scale: float = 1.0, steps: int = 10) -> torch.Tensor:
    n = int(8192 * scale)
    a = torch.randn(n, n - 1, device=device, dtype=torch.bfloat16)
    b = torch.randn(n - 1, n, device=device, dtype=torch.bfloat16)
    for _ in range(steps):
        c = a @ b  # expect: compute
    return c
