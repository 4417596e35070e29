"""brrr-trace: where your GPU time goes, line by line, and why."""

__version__ = "0.1.0"
