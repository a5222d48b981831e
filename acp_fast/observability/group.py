"""``--workers N --metrics``: one scrape of the shared port sees every worker.

Each worker serves its own exposition on a unix socket in a directory the
supervisor made before forking (``<dir>/<pid>.sock``). The worker the kernel
hands a scrape to reads its siblings' expositions from there (concurrently,
each bounded by ``handshake_timeout_s``), and answers their sum: counters,
gauges and histogram buckets add up across workers; the loop-lag reading is
the largest; the ``process_*`` series keep one per worker under a ``worker``
label (its pid). A sibling that does not answer (dead, restarting) is left
out of that scrape; its socket is removed when nothing listens on it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator

from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.utils import floatToGoString

#: Families reported per worker (a ``worker`` label) rather than summed.
PER_WORKER_PREFIXES = ("process_", "python_")
#: Families whose merged value is the largest worker's, not the sum.
MAXED = frozenset({"acp_event_loop_lag_last_seconds"})


@contextlib.contextmanager
def metrics_group() -> Iterator[str]:
    """A directory for the workers' metric sockets, made before the fork and removed at exit."""
    shm = "/dev/shm"
    base = shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else None
    directory = tempfile.mkdtemp(prefix="acp-fast-metrics-", dir=base)
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def socket_path(directory: str, pid: int | None = None) -> str:
    return os.path.join(directory, f"{os.getpid() if pid is None else pid}.sock")


async def fetch(path: str, timeout_s: float, head_limit: int) -> bytes | None:
    """One sibling's exposition, or None when it does not answer in time (a dead one's socket is removed)."""
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_unix_connection(path, limit=head_limit), timeout_s)
    except (ConnectionRefusedError, FileNotFoundError):
        with contextlib.suppress(OSError):
            os.unlink(path)
        return None
    except (OSError, TimeoutError):
        return None
    try:
        writer.write(b"GET /metrics HTTP/1.1\r\nHost: worker\r\nConnection: close\r\n\r\n")
        data = await asyncio.wait_for(reader.read(), timeout_s)
    except (OSError, TimeoutError):
        return None
    finally:
        writer.close()
    head, _, body = data.partition(b"\r\n\r\n")
    return body if head.startswith(b"HTTP/1.1 200") else None


def _number(value: float) -> str:
    return str(floatToGoString(value))  # type: ignore[no-untyped-call]


def _label_text(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def merge(parts: list[tuple[str, bytes]]) -> bytes:
    """The sum of several expositions ``(worker, text)``, in the text format."""
    families: dict[str, tuple[str, str, dict[tuple[str, tuple[tuple[str, str], ...]], float]]] = {}
    for worker, text in parts:
        for family in text_string_to_metric_families(text.decode()):
            _type, _doc, values = families.setdefault(family.name, (family.type, family.documentation, {}))
            per_worker = family.name.startswith(PER_WORKER_PREFIXES)
            for sample in family.samples:
                labels = dict(sample.labels)
                if per_worker:
                    labels["worker"] = worker
                key = (sample.name, tuple(sorted(labels.items(), key=lambda kv: (kv[0] == "le", kv[0]))))
                if family.name in MAXED:
                    values[key] = max(values.get(key, sample.value), sample.value)
                else:
                    values[key] = values.get(key, 0.0) + sample.value
    lines: list[str] = []
    for name, (kind, doc, values) in families.items():
        shown = f"{name}_total" if kind == "counter" else name
        lines.append(f"# HELP {shown} {doc.replace(chr(92), chr(92) * 2).replace(chr(10), chr(92) + 'n')}")
        lines.append(f"# TYPE {shown} {kind}")
        for (sample_name, label_pairs), value in values.items():
            text_value = _number(value)
            pairs = ",".join(f'{k}="{_label_text(v)}"' for k, v in label_pairs)
            lines.append(f"{sample_name}{{{pairs}}} {text_value}" if pairs else f"{sample_name} {text_value}")
    return ("\n".join(lines) + "\n").encode()


__all__ = ["fetch", "merge", "metrics_group", "socket_path"]
