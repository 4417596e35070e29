"""Traces at URLs: ``http(s)://`` through the standard library, other schemes (``s3://``,
``gs://``, ``memory://``, ...) through fsspec when it is installed (docs/architecture.md §13).

A URL is read as a stream, a buffer at a time, like a local file: never whole in memory, and
the loader's caps (events, name length, the gzip ratio) apply as they do to a file. Gzip is
told by content, not by name. A URL is only ever a trace: the source root stays a local folder.
An http(s) URL may redirect only to another http(s) URL (the opener has no handler for any other
scheme, and the redirect handler refuses them too).
"""

from __future__ import annotations

import io
import posixpath
import re
from typing import Any

from brrr_trace import __version__
from brrr_trace.errors import NotATraceError

_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]{1,31})://")
_HTTP = ("http", "https")
_TIMEOUT_S = 60.0
_BUFFER = 1 << 20


def is_url(text: str) -> bool:
    """Whether ``text`` is a URL (``scheme://...``) rather than a local path."""
    return _URL.match(text) is not None


def scheme_of(url: str) -> str:
    found = _URL.match(url)
    return found.group(1).lower() if found else ""


def name_of(url: str) -> str:
    """The file name a URL ends in (its path's last part, without the query)."""
    from urllib.parse import urlsplit

    return posixpath.basename(urlsplit(url).path.rstrip("/")) or url


def _opener() -> Any:
    # urllib is imported here, not with the module: it costs ~40 ms of every start.
    import urllib.request
    from urllib.parse import urljoin

    class Redirects(urllib.request.HTTPRedirectHandler):
        def http_error_302(self, req: Any, fp: Any, code: int, msg: str, headers: Any) -> Any:
            target = urljoin(req.full_url, headers.get("location") or headers.get("uri") or "")
            if scheme_of(target) not in _HTTP:
                fp.close()
                raise NotATraceError(
                    f"{req.full_url}: redirects to {target!r}, which is not an http(s) URL; "
                    "brrr-trace follows redirects only to http(s), so pass the trace's own URL."
                )
            return super().http_error_302(req, fp, code, msg, headers)

        http_error_301 = http_error_303 = http_error_307 = http_error_308 = http_error_302

    # Only the handlers http(s) needs: no file://, ftp:// or data: handler to be redirected to.
    opener = urllib.request.OpenerDirector()
    for handler in (
        urllib.request.ProxyHandler(),
        urllib.request.HTTPHandler(),
        urllib.request.HTTPSHandler(),
        Redirects(),
        urllib.request.HTTPDefaultErrorHandler(),
        urllib.request.HTTPErrorProcessor(),
    ):
        opener.add_handler(handler)
    return opener


def _http(url: str, method: str) -> Any:
    import urllib.error
    import urllib.request

    opener = _opener()
    request = urllib.request.Request(
        url,
        method=method,
        # The bytes as stored: a .json.gz stays gzip (told by content), a server must not
        # compress on the fly what the loader reads as plain JSON.
        headers={"User-Agent": f"brrr-trace/{__version__}", "Accept-Encoding": "identity"},
    )
    try:
        return opener.open(request, timeout=_TIMEOUT_S)
    except urllib.error.HTTPError as error:
        error.close()
        raise NotATraceError(
            f"{url}: the server answered {error.code} {error.reason}; check the URL (and that "
            "it needs no sign-in)."
        ) from None
    except urllib.error.URLError as error:
        raise NotATraceError(f"{url}: cannot be read ({error.reason}).") from None
    except (OSError, ValueError) as error:
        raise NotATraceError(f"{url}: cannot be read ({error}).") from None


def _fsspec() -> Any:
    try:
        import fsspec  # type: ignore[import-untyped]
    except ImportError:
        raise NotATraceError(
            "reading traces at s3://, gs:// and other non-http URLs needs fsspec (and the "
            "scheme's own package, e.g. s3fs): pip install 'brrr-trace[ray]' s3fs."
        ) from None
    return fsspec


def _filesystem(url: str) -> tuple[Any, str]:
    try:
        fs, path = _fsspec().core.url_to_fs(url)
    except (ImportError, ValueError) as error:
        # fsspec names the package a scheme needs ("Install s3fs to access S3").
        raise NotATraceError(f"{url}: cannot be opened ({error}).") from None
    return fs, path


class _Stream(io.RawIOBase):
    """A response or remote file as a raw stream: the bytes read so far are its position."""

    def __init__(self, source: Any, size: int | None) -> None:
        self._source = source
        self._read = 0
        self.size = size  # bytes in all, when the server or store says

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self._source.read(len(buffer))
        count = len(data)
        buffer[:count] = data
        self._read += count
        return count

    def tell(self) -> int:
        return self._read

    def close(self) -> None:
        if not self.closed:
            self._source.close()
        super().close()


def remote_size(raw: Any) -> int | None:
    """The size a URL's stream (from ``open_url``) was said to have, 0 when unknown; None for a
    stream that is not a URL's."""
    inner = getattr(raw, "raw", None)
    return (inner.size or 0) if isinstance(inner, _Stream) else None


def open_url(url: str) -> io.BufferedReader:
    """The trace at ``url`` as a buffered binary stream (with ``peek``); NotATraceError when it
    cannot be opened."""
    if scheme_of(url) in _HTTP:
        response = _http(url, "GET")
        length = response.headers.get("Content-Length")
        size = int(length) if length and length.isdigit() else None
        return io.BufferedReader(_Stream(response, size), _BUFFER)
    fs, path = _filesystem(url)
    try:
        size = fs.size(path)
        handle = fs.open(path, "rb")
    except FileNotFoundError:
        raise NotATraceError(f"{url}: no such file.") from None
    except (OSError, ValueError) as error:
        raise NotATraceError(f"{url}: cannot be read ({error}).") from None
    return io.BufferedReader(_Stream(handle, size if isinstance(size, int) else None), _BUFFER)


def size_of(url: str) -> int | None:
    """The size of the trace at ``url`` in bytes, when the server or store says (None else)."""
    try:
        if scheme_of(url) in _HTTP:
            with _http(url, "HEAD") as response:
                length = response.headers.get("Content-Length")
                return int(length) if length and length.isdigit() else None
        fs, path = _filesystem(url)
        size = fs.size(path)
        return size if isinstance(size, int) else None
    except (NotATraceError, OSError, ValueError):
        return None


def is_folder(url: str) -> bool:
    """Whether the URL names a prefix to list (fsspec stores that can list); an http(s) URL is
    always one file."""
    if scheme_of(url) in _HTTP:
        return False
    fs, path = _filesystem(url)
    try:
        return bool(fs.isdir(path))
    except (OSError, ValueError):
        return False


def listing(url: str) -> tuple[list[str], list[str]]:
    """The files below a URL prefix, as URLs, sorted: (all of them at any depth, those directly
    in it)."""
    fs, path = _filesystem(url)
    try:
        below = sorted(fs.find(path))
        direct = sorted(e["name"] for e in fs.ls(path, detail=True) if e.get("type") == "file")
    except (OSError, ValueError) as error:
        raise NotATraceError(f"{url}: cannot be listed ({error}).") from None
    return [fs.unstrip_protocol(p) for p in below], [fs.unstrip_protocol(p) for p in direct]


__all__ = [
    "is_folder",
    "is_url",
    "listing",
    "name_of",
    "open_url",
    "remote_size",
    "scheme_of",
    "size_of",
]
