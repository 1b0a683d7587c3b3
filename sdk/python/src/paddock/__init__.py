"""paddock's Python SDK: a client of the paddock daemon's API.

    from paddock import Client

    with Client() as client:                      # the default socket, as the CLI finds it
        with client.run(project="app", task="fix the typo", agent_name="coder") as run:
            for event in client.stream_events(run.id):
                ...

Client is synchronous, AsyncClient the same for asyncio. The types are the
dataclasses of paddock.types (generated from the API's OpenAPI document);
errors are PaddockError and a subclass per code (paddock.errors).
"""

from . import types
from ._core import AGENT_HEADER, Diff, Endpoint, ExecChunk, default_home, default_socket
from .aio import AsyncClient, AsyncExecStream
from .client import Client, ExecStream, McpReply
from .errors import (ERRORS, AttributionLeak, BadRequest, Busy, Conflict, DecodeError, Forbidden, Internal, NodeLost,
                     NotBootstrapped, NotFound, PaddockError, RunMismatch, TooLarge, TransportError, Unauthorized,
                     Unsupported)
from .mcp import AsyncMcpSession, McpError, McpSession
from .run import AsyncRunSession, RunSession

__version__ = "0.1.0"

__all__ = [
    "AGENT_HEADER", "AsyncClient", "AsyncExecStream", "AsyncMcpSession", "AsyncRunSession", "AttributionLeak",
    "BadRequest", "Busy", "Client", "Conflict", "DecodeError", "Diff", "ERRORS", "Endpoint", "ExecChunk",
    "ExecStream", "Forbidden", "Internal", "McpError", "McpReply", "McpSession", "NodeLost", "NotBootstrapped",
    "NotFound", "PaddockError", "RunMismatch", "RunSession", "TooLarge", "TransportError", "Unauthorized",
    "Unsupported", "default_home", "default_socket", "types",
]
