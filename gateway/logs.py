"""Logging: text or JSON lines, every record carrying the id of the request it belongs to."""

from __future__ import annotations

import json
import logging
import time

from .config import LoggingConfig
from .jsontext import escape_line_separators
from .web.middleware import request_id_var


class _RequestIdFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = request_id_var.get() or "-"
        return True


class _ClientFaultFilter(logging.Filter):
    """uvicorn logs a WebSocket text frame that is not UTF-8 as an ERROR with a traceback, once per frame
    any client sends; it is the client's fault, already answered with close code 1007: one warning line."""

    INVALID_UTF8 = "Invalid UTF-8 sequence received from client."

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg == self.INVALID_UTF8:
            record.msg = "a WebSocket client sent a text frame that is not UTF-8; the socket was closed with 1007"
            record.exc_info, record.exc_text = None, None
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


class JSONFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        request_id = getattr(record, "request_id", "-")
        if request_id != "-":
            entry["request_id"] = request_id
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return escape_line_separators(json.dumps(entry, ensure_ascii=False))


def configure_logging(config: LoggingConfig) -> None:
    handler = logging.StreamHandler()
    handler.addFilter(_RequestIdFilter())
    if config.format == "json":
        handler.setFormatter(JSONFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(config.level.upper())
    # uvicorn's own loggers go through the same handler.
    for name in ("uvicorn", "uvicorn.error"):
        logging.getLogger(name).handlers[:] = []
        logging.getLogger(name).propagate = True
    if not any(isinstance(each, _ClientFaultFilter) for each in logging.getLogger("uvicorn.error").filters):
        logging.getLogger("uvicorn.error").addFilter(_ClientFaultFilter())
    # httpx logs every request at INFO: a line per engine call and per tool call, written on the event
    # loop, with the whole URL, whose query may hold a credential (an MCP server's `?token=`); httpx2 is
    # the fork the mcp SDK uses. The gateway logs what matters of those itself (the access log, failures).
    for name in ("httpx", "httpcore", "httpx2", "httpcore2"):
        logging.getLogger(name).setLevel(max(logging.WARNING, root.level))
