"""One HTTP/1.1 request as RFC 9112 reads it, sans-IO: the head (``parse_head``) and the body (``BodyReader``).

The rules are strict where a lenient reader would let two readers disagree:
a head's lines end in CRLF, ``Content-Length`` beside ``Transfer-Encoding``
is refused, a chunk size that overflows is refused, a request target is
origin-form or absolute-form. Every refusal is a ``BadRequest`` carrying the
status the channel answers (hosting/http.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+\Z")
_BAD_VALUE = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")
_BAD_TARGET = re.compile(rb"[\x00-\x20\x7f-\xff]")
_VERSION = re.compile(rb"HTTP/([0-9])\.([0-9])\Z")
_HEX = re.compile(rb"[0-9A-Fa-f]{1,16}\Z")  # 16 hex digits: 2**64, far past any body we take
_CRLF = b"\r\n"


class BadRequest(Exception):
    """A request that cannot be read as RFC 9112 says: answered with ``status`` and the socket closed."""

    def __init__(self, status: int, text: str) -> None:
        super().__init__(text)
        self.status = status


class Request:
    """One request head, as parsed; ``principal`` and ``max_body`` are set by admission."""

    __slots__ = (
        "chunked",
        "content_length",
        "expect_continue",
        "headers",
        "keep_alive",
        "max_body",
        "method",
        "path",
        "principal",
        "target",
        "version",
    )

    def __init__(self, method: bytes, target: bytes, version: bytes, headers: list[tuple[bytes, bytes]]) -> None:
        self.method = method
        self.target = target  # origin-form: path and query
        self.path = target.split(b"?", 1)[0]
        self.version = version
        self.headers = headers  # names lowercased, in arrival order
        self.principal: str | None = None
        self.max_body = 0
        self.content_length = 0
        self.chunked = False
        self.keep_alive = True
        self.expect_continue = False

    def values(self, name: bytes) -> list[bytes]:
        return [v for k, v in self.headers if k == name]

    @property
    def has_body(self) -> bool:
        return self.chunked or self.content_length > 0


def parse_head(head: bytes) -> Request:
    """The request line and fields (``head`` without its final CRLF CRLF), or ``BadRequest``."""
    lines = head.split(_CRLF)
    if any(b"\n" in line or b"\r" in line for line in lines):
        raise BadRequest(400, "a line of the request head does not end in CRLF")
    parts = lines[0].split(b" ")
    if len(parts) != 3 or not all(parts):
        raise BadRequest(400, "malformed request line")
    method, target, version = parts
    if not _TOKEN.match(method):
        raise BadRequest(400, "malformed method")
    found = _VERSION.match(version)
    if found is None:
        raise BadRequest(400, "malformed HTTP version")
    if found.group(1) != b"1":
        raise BadRequest(505, "only HTTP/1.0 and HTTP/1.1 are served")
    if _BAD_TARGET.search(target):
        raise BadRequest(400, "malformed request target")
    headers: list[tuple[bytes, bytes]] = []
    for line in lines[1:]:
        if line[:1] in (b" ", b"\t"):
            raise BadRequest(400, "obsolete line folding is not accepted")
        name, sep, value = line.partition(b":")
        if not sep or not _TOKEN.match(name):
            raise BadRequest(400, "malformed header field")
        value = value.strip(b" \t")
        if _BAD_VALUE.search(value):
            raise BadRequest(400, "a header field value holds a control character")
        headers.append((name.lower(), value))
    request = Request(method, origin_form(method, target), version, headers)
    _framing(request)
    return request


def origin_form(method: bytes, target: bytes) -> bytes:
    """The path and query of an origin-form or absolute-form target (RFC 9112 §3.2: a server must take both)."""
    if target.startswith(b"/"):
        return target
    lower = target.lower()
    for scheme in (b"http://", b"https://"):
        if lower.startswith(scheme):
            rest = target[len(scheme) :]
            cut = min((i for i in (rest.find(b"/"), rest.find(b"?")) if i >= 0), default=len(rest))
            if cut == 0:
                raise BadRequest(400, "an absolute-form target needs a host")
            path = rest[cut:]
            return path if path.startswith(b"/") else b"/" + path
    if target == b"*" and method == b"OPTIONS":
        return target
    raise BadRequest(400, "the request target must be origin-form (/path) or absolute-form (http://host/path)")


def _framing(request: Request) -> None:
    """Body framing, Host, keep-alive and Expect, as RFC 9112 §6.3 and §9.3 say."""
    http11 = request.version == b"HTTP/1.1"
    te = request.values(b"transfer-encoding")
    cl = request.values(b"content-length")
    if te and cl:
        raise BadRequest(400, "Content-Length and Transfer-Encoding together are refused (request smuggling)")
    if te:
        if not http11:
            raise BadRequest(400, "Transfer-Encoding in an HTTP/1.0 request")
        codings = [c.strip().lower() for c in b",".join(te).split(b",") if c.strip()]
        if not codings or codings[-1] != b"chunked":
            raise BadRequest(400, "a request's Transfer-Encoding must end in chunked")
        if len(codings) > 1:
            raise BadRequest(501, "only the chunked transfer coding is supported")
        request.chunked = True
    elif cl:
        values = {v.strip() for v in b",".join(cl).split(b",")}
        if len(values) != 1:
            raise BadRequest(400, "conflicting Content-Length values")
        value = values.pop()
        if not value.isdigit() or len(value) > 18:
            raise BadRequest(400, "malformed Content-Length")
        request.content_length = int(value)
    hosts = request.values(b"host")
    if len(hosts) > 1 or (http11 and not hosts):
        raise BadRequest(400, "an HTTP/1.1 request needs exactly one Host header")
    tokens = {t.strip().lower() for v in request.values(b"connection") for t in v.split(b",")}
    request.keep_alive = b"close" not in tokens if http11 else b"keep-alive" in tokens
    request.expect_continue = http11 and any(v.lower() == b"100-continue" for v in request.values(b"expect"))


class BodyReader:
    """One request body as it arrives, ``Content-Length`` or chunked, of at most ``request.max_body`` bytes."""

    __slots__ = ("_body", "_max_chunk_line", "_max_trailer", "_phase", "_remaining", "_trailer_bytes", "request")

    def __init__(self, request: Request, max_chunk_line: int, max_trailer: int) -> None:
        self.request = request
        self._max_chunk_line = max_chunk_line
        self._max_trailer = max_trailer
        self._body = bytearray()
        self._remaining = request.content_length  # Content-Length bytes still to read, or the current chunk's
        self._phase = 0  # 0 size line, 1 data, 2 CRLF after data, 3 trailers
        self._trailer_bytes = 0

    def read(self, buf: bytearray) -> bytes | None:
        """Take what ``buf`` holds of the body: the whole body once complete, else None; ``BadRequest``."""
        if not self.request.chunked:
            take = min(self._remaining, len(buf))
            self._body += buf[:take]
            del buf[:take]
            self._remaining -= take
            return None if self._remaining else bytes(self._body)
        while True:
            phase = self._phase
            if phase == 1:
                take = min(self._remaining, len(buf))
                if not take:
                    return None
                self._body += buf[:take]
                del buf[:take]
                self._remaining -= take
                if self._remaining:
                    return None
                self._phase = 2
                continue
            if phase == 2:
                if len(buf) < 2:
                    return None
                if buf[:2] != _CRLF:
                    raise BadRequest(400, "chunk data does not end in CRLF")
                del buf[:2]
                self._phase = 0
                continue
            line = _line(buf, self._max_chunk_line if phase == 0 else self._max_trailer)
            if line is None:
                return None
            if phase == 3:
                if self._trailer(line):
                    return bytes(self._body)
            else:
                self._chunk_size(line)

    def _trailer(self, line: bytes) -> bool:
        """One trailer line; True at the empty line that ends the body."""
        self._trailer_bytes += len(line) + 2
        if self._trailer_bytes > self._max_trailer:
            raise BadRequest(431, "the trailer section is too large")
        if not line:
            return True
        if not _TOKEN.match(line.partition(b":")[0]):
            raise BadRequest(400, "malformed trailer field")
        return False

    def _chunk_size(self, line: bytes) -> None:
        size, _, ext = line.partition(b";")
        size = size.rstrip(b" \t")
        if not _HEX.match(size):
            raise BadRequest(400, "malformed or overflowing chunk size")
        if _BAD_VALUE.search(ext):
            raise BadRequest(400, "a chunk extension holds a control character")
        n = int(size, 16)
        max_body = self.request.max_body
        if len(self._body) + n > max_body:
            raise BadRequest(413, f"a request body holds one ACP message of at most {max_body} bytes")
        if n == 0:
            self._phase = 3
        else:
            self._remaining = n
            self._phase = 1


def _line(buf: bytearray, limit: int) -> bytes | None:
    """One CRLF-terminated line of at most ``limit`` bytes from the buffer (None: not yet complete)."""
    end = buf.find(_CRLF, 0, limit + 2)
    lf = buf.find(b"\n", 0, limit + 2)
    if lf >= 0 and (end < 0 or lf < end + 1):
        raise BadRequest(400, "a chunk line does not end in CRLF")
    if end < 0:
        if len(buf) > limit:
            raise BadRequest(400, f"a chunk line exceeds {limit} bytes")
        return None
    line = bytes(buf[:end])
    del buf[: end + 2]
    if b"\r" in line:
        raise BadRequest(400, "a bare CR in a chunk line")
    return line


def headers_map(request: Request) -> dict[str, str]:
    """The request's headers for the auth hook: case-insensitive lookup, last value of a repeated name."""
    return _CaseInsensitive((k.decode("latin-1"), v.decode("latin-1")) for k, v in request.headers)


def header_pairs(request: Request) -> list[tuple[str, str]]:
    """Every header as a (name, value) pair, repeats kept: for ``auth.duplicate_header``."""
    return [(k.decode("latin-1"), v.decode("latin-1")) for k, v in request.headers]


class _CaseInsensitive(dict[str, str]):
    def __init__(self, items: Iterable[tuple[str, str]]) -> None:
        super().__init__((k.lower(), v) for k, v in items)

    def get(self, key: str, default: Any = None) -> Any:
        return super().get(key.lower(), default)

    def __getitem__(self, key: str) -> str:
        return super().__getitem__(key.lower())

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and super().__contains__(key.lower())
