"""sandlot: the Python SDK of sandlot, self-hosted sandboxes for AI agents.

Contexts by tenant (the key's), conversation and path; run_code,
run_analysis, bash and files; streaming iterators; typed errors; sync
(Client) and async (AsyncClient) on httpx; specification 001's
ExecutionContextManager."""

from . import types
from .client import SDK_VERSION, AsyncClient, AsyncPath, Client, Event, Path, Result, compatible
from .types import Language
from .ecm import ExecutionContext, ExecutionContextIdentity, ExecutionContextManager, ExecutionResult, to_result
from .errors import (AlreadyExistsError, DeadlineExceededError, FailedPreconditionError, InternalError,
                     InvalidArgumentError, NotFoundError, PermissionDeniedError, ResourceExhaustedError, SandlotError,
                     UnauthenticatedError, UnavailableError, VersionMismatchError)

__all__ = [
    "types", "Language", "SDK_VERSION", "AsyncClient", "AsyncPath", "Client", "Event", "Path", "Result", "compatible",
    "ExecutionContext", "ExecutionContextIdentity", "ExecutionContextManager", "ExecutionResult", "to_result",
    "AlreadyExistsError", "DeadlineExceededError", "FailedPreconditionError", "InternalError", "InvalidArgumentError",
    "NotFoundError", "PermissionDeniedError", "ResourceExhaustedError", "SandlotError", "UnauthenticatedError",
    "UnavailableError", "VersionMismatchError",
]
__version__ = SDK_VERSION
