"""One exception hierarchy for every JSON-RPC error acp_fast sends or receives.

Each concrete class declares its ``code`` in its own body; that registers it,
and a second class declaring a code already taken fails at import. Subclasses
that only refine the message (``ServerBusy``) inherit the code without
registering. ``to_error_obj`` is the only place the wire form is built and
``from_error_obj`` the only place it is read back.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

_BY_CODE: dict[int, type[AcpError]] = {}


class AcpError(Exception):
    """A JSON-RPC error. Abstract: raise one of the concrete subclasses."""

    code: ClassVar[int]
    default_message: ClassVar[str] = "Error"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "code" in cls.__dict__:
            taken = _BY_CODE.get(cls.code)
            if taken is not None:
                raise TypeError(
                    f"{cls.__name__} declares code {cls.code}, already used by {taken.__name__}"
                )
            _BY_CODE[cls.code] = cls

    def __init__(self, message: str | None = None, data: Any = None) -> None:
        if type(self) is AcpError:
            raise TypeError("AcpError is abstract; raise a subclass or OtherError(code, ...)")
        self.message = message if message is not None else self.default_message
        self.data = data
        super().__init__(self.message)

    def to_error_obj(self) -> dict[str, Any]:
        """The wire form ``{code, message, data?}``."""
        obj: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            obj["data"] = self.data
        return obj

    # Constructor names of the official Python SDK's RequestError, so code
    # written against it keeps working (compat).
    @classmethod
    def parse_error(cls, data: Any = None) -> AcpError:
        return ParseError(data=data)

    @classmethod
    def invalid_request(cls, data: Any = None) -> AcpError:
        return InvalidRequest(data=data)

    @classmethod
    def method_not_found(cls, method: str) -> AcpError:
        return MethodNotFound(f"Method not found: {method}", {"method": method})

    @classmethod
    def invalid_params(cls, data: Any = None) -> AcpError:
        return InvalidParams(data=data)

    @classmethod
    def internal_error(cls, data: Any = None) -> AcpError:
        return InternalError(data=data)

    @classmethod
    def auth_required(cls, data: Any = None) -> AcpError:
        return AuthRequired(data=data)

    @classmethod
    def resource_not_found(cls, uri: str | None = None) -> AcpError:
        return ResourceNotFound(data={"uri": uri} if uri is not None else None)


class ParseError(AcpError):
    code = -32700
    default_message = "Parse error"


class InvalidRequest(AcpError):
    code = -32600
    default_message = "Invalid request"


class MethodNotFound(AcpError):
    code = -32601
    default_message = "Method not found"


class InvalidParams(AcpError):
    code = -32602
    default_message = "Invalid params"


class InternalError(AcpError):
    code = -32603
    default_message = "Internal error"


class RequestCancelled(AcpError):
    code = -32800
    default_message = "Request cancelled"


class ServerError(AcpError):
    """-32000: the ACP family for refusals (authentication, limits, busy)."""

    code = -32000
    default_message = "Server error"


class AuthRequired(ServerError):
    default_message = "Authentication required"


#: Which limit refused a request (``ServerBusy.reason``): the background pool (R08), the process's
#: running prompts or its sessions (hosting), or any other bound.
BusyReason = Literal["pool_full", "process_prompts", "process_sessions", "other"]


class ServerBusy(ServerError):
    """A limit refused the request instead of queueing it (R08); ``reason`` names the limit.

    The reason is typed, not read back from the message, so what counts refusals
    (``acp_requests_refused_total``) never depends on the wording.
    """

    default_message = "Server busy"

    def __init__(self, message: str | None = None, data: Any = None, reason: BusyReason = "other") -> None:
        super().__init__(message, data)
        self.reason: BusyReason = reason


class PromptInProgress(ServerError):
    """A second prompt for a session whose turn is still open (R07)."""

    default_message = "A prompt is already running for this session"


class ResourceNotFound(AcpError):
    code = -32002
    default_message = "Resource not found"


class McpBindingError(AcpError):
    """An outer error of request-scoped MCP over ACP (R17): the binding failed, there is no inner outcome."""


class McpLimitExceeded(McpBindingError):
    code = -33000
    default_message = "MCP-over-ACP request limit exceeded"


class McpServerUnavailable(McpBindingError):
    code = -33001
    default_message = "MCP server unavailable"


class McpBackendFailed(McpBindingError):
    code = -33002
    default_message = "MCP server failed without an outcome"


class OtherError(AcpError):
    """An error with a code acp_fast has no class for (decoded from a peer)."""

    def __init__(self, code: int, message: str | None = None, data: Any = None) -> None:
        self.code = code  # type: ignore[misc]  # per instance, never registered
        super().__init__(message, data)


class ConnectionClosed(InternalError):
    """The peer went away before answering; pending requests fail with this."""

    default_message = "Connection closed"


class ConfigError(ValueError):
    """A configuration value that cannot be served, raised when the configuration is built.

    Not an AcpError: no peer ever sees it. ``field`` names the setting, so a
    command line can report the flag that carries it.
    """

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


class DeadlockError(RuntimeError):
    """Awaiting a response from inside an ordered handler would never return (R21).

    Not an AcpError: it is a programming error in the handler, raised at once
    instead of hanging, and reaches the peer as -32603 like any other bug.
    """


def from_error_obj(obj: Any) -> AcpError:
    """Turn a peer's wire error into the matching exception class."""
    # ``type() is int``: a bool is an int to isinstance, but no JSON-RPC code.
    if not isinstance(obj, dict) or type(obj.get("code")) is not int:
        return InternalError("malformed error object from peer", {"error": obj})
    code: int = obj["code"]
    message = obj.get("message")
    message = message if isinstance(message, str) else None
    cls = _BY_CODE.get(code)
    if cls is None:
        return OtherError(code, message, obj.get("data"))
    return cls(message, obj.get("data"))


def from_exception(exc: BaseException) -> AcpError:
    """Map any exception to the error sent to the peer.

    An AcpError goes out as it is. Anything else is a bug in handler code: the
    client gets -32603 with the exception's type only (the traceback goes to
    stderr, never to the client) and the original stays chained as the cause.
    """
    if isinstance(exc, AcpError):
        return exc
    err = InternalError(data={"error": type(exc).__name__})
    err.__cause__ = exc
    return err


__all__ = [
    "AcpError",
    "AuthRequired",
    "BusyReason",
    "ConnectionClosed",
    "DeadlockError",
    "InternalError",
    "InvalidParams",
    "InvalidRequest",
    "McpBackendFailed",
    "McpBindingError",
    "McpLimitExceeded",
    "McpServerUnavailable",
    "MethodNotFound",
    "OtherError",
    "ParseError",
    "PromptInProgress",
    "RequestCancelled",
    "ResourceNotFound",
    "ServerBusy",
    "ServerError",
    "from_error_obj",
    "from_exception",
]
