"""Logging for ``demo`` and ``serve``: stderr only (stdout carries nothing but ACP messages), text or JSON."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from typing import Any


class JsonFormatter(logging.Formatter):
    """``--log-format json``: one JSON object per record."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": round(time.time(), 3),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out)


def configure(args: argparse.Namespace) -> None:
    """The root logger as ``--log-level`` and ``--log-format`` say, writing to stderr."""
    handler = logging.StreamHandler(sys.stderr)
    if args.log_format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=args.log_level.upper(), handlers=[handler])


__all__ = ["JsonFormatter", "configure"]
