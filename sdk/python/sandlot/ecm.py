"""Specification 001's ExecutionContextManager over the daemon, in
snake_case: an application written against that interface switches by
constructing this one. The tenant is the API key's; a tenant_id that is not
the key's tenant (its id or name) is refused."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, TypedDict

from .client import Client, Path
from .types import Language
from .types import Context, RunCodeResult, TenantInfo
from .errors import InvalidArgumentError, NotFoundError, PermissionDeniedError, UnavailableError


class ExecutionContextIdentity(TypedDict, total=False):
    tenant_id: str
    conversation_id: str
    path_id: str
    user_id: str


class ExecutionResult(TypedDict, total=False):
    success: bool
    output: str
    error: str
    execution_time_ms: int
    output_type: Literal["text", "json", "table", "error"]
    truncated: bool


@dataclass
class ExecutionContext:
    id: str
    sandbox_id: str
    created_at: datetime
    last_used_at: datetime
    expires_at: datetime
    execution_count: int
    total_execution_time_ms: int
    status: Literal["active", "expired", "error", "terminated"]
    last_error: str | None = None


def _time(s: Any) -> datetime:
    return datetime.fromisoformat(str(s).replace("Z", "+00:00")) if s else datetime.fromtimestamp(0)


class ExecutionContextManager:
    """With no arguments it reads SANDLOT_URL and SANDLOT_API_KEY."""

    def __init__(self, url: str | None = None, api_key: str | None = None, *, client: Client | None = None) -> None:
        self.client = client or Client(url, api_key)
        self._tenant: TenantInfo | None = None

    def _path(self, identity: ExecutionContextIdentity) -> Path:
        conv = identity.get("conversation_id") or identity.get("conversationId")
        if not conv:
            raise InvalidArgumentError("invalid_argument", "identity conversation_id is required")
        tenant = identity.get("tenant_id") or identity.get("tenantId")
        if tenant:
            if self._tenant is None:
                self._tenant = self.client.whoami()
            if tenant not in (self._tenant["id"], self._tenant["name"]):
                raise PermissionDeniedError("permission_denied",
                                            f"identity tenant_id {tenant!r} is not the tenant of the API key; the key decides the tenant")
        path = identity.get("path_id") or identity.get("pathId") or "main"
        return self.client.path(str(conv), str(path), user_id=identity.get("user_id"))

    def get_or_create_context(self, identity: ExecutionContextIdentity) -> ExecutionContext:
        p = self._path(identity)
        c = p.active_context()
        if c is None:
            p.list_files("/home/user")  # a context is made by its first use; this runs no code
            c = p.active_context()
        if c is None:
            raise UnavailableError("unavailable", "the context ended as soon as it was created; try again")
        return _context(c)

    def execute_code(self, identity: ExecutionContextIdentity, code: str, language: Language = "python") -> ExecutionResult:
        r = self._path(identity).run_code(code, language)
        return to_result(r)

    def terminate_context(self, identity: ExecutionContextIdentity) -> None:
        c = self._path(identity).active_context()
        if c is None:
            return
        try:
            self.client.terminate(str(c["id"]))
        except NotFoundError:
            pass

    def has_active_context(self, identity: ExecutionContextIdentity) -> bool:
        return bool(self._path(identity).active_context() is not None)

    def cleanup_expired_contexts(self) -> int:
        """The daemon ends idle contexts itself (its TTL)."""
        return 0


def _context(c: Context) -> ExecutionContext:
    st = c.get("status")
    status: Literal["active", "expired", "error", "terminated"] = (
        "active" if st in ("creating", "ready") else "error" if st == "error"
        else "expired" if c.get("terminationReason") == "expired" else "terminated")
    return ExecutionContext(id=str(c.get("id", "")), sandbox_id=str(c.get("sandboxId", "")), created_at=_time(c.get("createdAt")),
                            last_used_at=_time(c.get("lastUsedAt")), expires_at=_time(c.get("expiresAt")),
                            execution_count=int(c.get("executionCount", 0)), total_execution_time_ms=int(c.get("totalExecutionTimeMs", 0)),
                            status=status, last_error=c.get("lastError"))


def to_result(r: RunCodeResult) -> ExecutionResult:
    """run_code's result as 001's ExecutionResult."""
    main = next((x.get("text") for x in r.get("results") or [] if x.get("main")), None)
    output = str(r.get("stdout", ""))
    if main:
        output = f"{output}{'' if not output or output.endswith(chr(10)) else chr(10)}{main}" if output else str(main)
    out: ExecutionResult = {"success": bool(r.get("success")), "execution_time_ms": int(r.get("executionTimeMs", 0)),
                            "truncated": bool(r.get("truncated"))}
    if r.get("success"):
        out["output"] = output
        out["output_type"] = r.get("outputType", "text")
    else:
        err = r.get("error")
        out["error"] = f"{err.get('name')}: {err.get('value')}" if isinstance(err, dict) else str(r.get("stderr") or f"exit code {r.get('exitCode')}")
        out["output_type"] = "error"
        if output:
            out["output"] = output
    return out
