"""One pass over the raw bytes of every public trace: their devices and kernel durations.

Shared by the tests of device recognition and of the kernel taxonomy, so that the ~400 MB are
read once per test process (the ``public_scan`` fixture in conftest.py).
"""

from __future__ import annotations

import json
import re
import zlib
from collections import defaultdict
from pathlib import Path

_KERNEL = re.compile(rb'\s*,\s*"name":\s*"([^"\\]*)"[^{}]*?"dur":\s*([0-9.eE+-]+)')


class PublicScan:
    """What the tests need from every public trace, read in one pass over the raw bytes.

    A full JSON parse of the ~400 MB would take seconds; the first ``deviceProperties`` entry
    and (kernel name, duration) pairs can be cut out of the text directly.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self.devices: list[tuple[str, dict[str, object]]] = []
        self.kernel_us: dict[str, float] = defaultdict(float)
        for path in sorted(root.rglob("*.json*")):
            raw = path.read_bytes()
            if path.suffix == ".gz":
                try:
                    raw = zlib.decompress(raw, 31)
                except zlib.error:
                    continue
            self._device(path, raw)
            for marker in (b'"cat": "kernel"', b'"cat": "Kernel"'):
                if marker not in raw:
                    continue
                for chunk in raw.split(marker)[1:]:
                    m = _KERNEL.match(chunk)
                    if m:
                        self.kernel_us[m.group(1).decode("utf-8", "replace")] += float(m.group(2))

    def _device(self, path: Path, raw: bytes) -> None:
        at = raw.find(b'"deviceProperties"')
        if at < 0:
            return
        text = raw[at : at + 200_000].decode("utf-8", "replace")
        start = text.find("[")
        try:
            props, _ = json.JSONDecoder().raw_decode(text[start:])
        except ValueError:
            return
        if props:
            self.devices.append((str(path.relative_to(self.root)), props[0]))
