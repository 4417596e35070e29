"""tinyvit: a small Vision Transformer for quick experiments."""

from tinyvit.layers import Attention, Block, Mlp, PatchEmbed
from tinyvit.model import TinyViT, tinyvit_small, tinyvit_tiny

__all__ = ["Attention", "Block", "Mlp", "PatchEmbed", "TinyViT", "tinyvit_small", "tinyvit_tiny"]
__version__ = "0.1.0"
