"""Typed errors that mirror the daemon's error categories (errdefs).

Every non-2xx answer of the API is {code, message}; it becomes the
subclass of its code, so callers catch ``sandlot.NotFoundError`` rather
than parse text.
"""

from __future__ import annotations

import json

import httpx


class SandlotError(Exception):
    """Every error the daemon answers, and the base of the typed ones."""

    def __init__(self, code: str, message: str, status: int = 0,
                 request_id: str | None = None, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status
        self.request_id = request_id
        self.retry_after = retry_after


class NotFoundError(SandlotError): ...
class InvalidArgumentError(SandlotError): ...
class AlreadyExistsError(SandlotError): ...
class FailedPreconditionError(SandlotError): ...
class ResourceExhaustedError(SandlotError): ...
class UnavailableError(SandlotError): ...
class DeadlineExceededError(SandlotError): ...
class PermissionDeniedError(SandlotError): ...
class UnauthenticatedError(SandlotError): ...
class InternalError(SandlotError): ...


class VersionMismatchError(FailedPreconditionError):
    """The daemon's release is not the one this SDK was released with."""


_CLASSES: dict[str, type[SandlotError]] = {
    "not_found": NotFoundError,
    "invalid_argument": InvalidArgumentError,
    "already_exists": AlreadyExistsError,
    "failed_precondition": FailedPreconditionError,
    "resource_exhausted": ResourceExhaustedError,
    "unavailable": UnavailableError,
    "deadline_exceeded": DeadlineExceededError,
    "permission_denied": PermissionDeniedError,
    "unauthenticated": UnauthenticatedError,
    "internal": InternalError,
}

_BY_STATUS = {400: "invalid_argument", 401: "unauthenticated", 403: "permission_denied", 404: "not_found",
              408: "deadline_exceeded", 409: "already_exists", 412: "failed_precondition", 413: "resource_exhausted",
              429: "resource_exhausted", 502: "unavailable", 503: "unavailable", 504: "deadline_exceeded"}


def make_error(code: str, message: str, status: int = 0, request_id: str | None = None,
               retry_after: float | None = None) -> SandlotError:
    """The typed error of a category (by status when the code is unknown)."""
    if code not in _CLASSES:
        code = _BY_STATUS.get(status, "internal")
    return _CLASSES[code](code, message, status, request_id, retry_after)


def error_from_response(res: httpx.Response) -> SandlotError:
    """Reads a non-2xx answer's {code, message, requestId}."""
    code, message, request_id = "", res.reason_phrase, res.headers.get("x-request-id")
    try:
        body = json.loads(res.text)
        if isinstance(body, dict):
            code = str(body.get("code", ""))
            message = str(body.get("message", message))
            request_id = body.get("requestId") or request_id
    except ValueError:
        message = res.text[:500] or message
    ra = res.headers.get("retry-after")
    retry_after = float(ra) if ra is not None and ra.isdigit() else None
    return make_error(code, message, res.status_code, request_id, retry_after)
