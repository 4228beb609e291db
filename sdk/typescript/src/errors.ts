// Typed errors that mirror the daemon's error categories (errdefs): every
// non-2xx answer of the API is {code, message} and becomes the subclass of
// its code, so a caller tests `err instanceof NotFoundError` (or
// `err.code === "not_found"`) rather than parsing text.

/** The error categories of the API (Error.code). */
export type ErrorCode =
  | "not_found"
  | "invalid_argument"
  | "already_exists"
  | "failed_precondition"
  | "resource_exhausted"
  | "unavailable"
  | "deadline_exceeded"
  | "permission_denied"
  | "unauthenticated"
  | "internal";

/** SandlotError is every error the daemon answers, and the base of the typed ones. */
export class SandlotError extends Error {
  /** The category, as the daemon sent it. */
  readonly code: ErrorCode;
  /** The HTTP status (0 when the error arose in the client, e.g. a stream cut short). */
  readonly status: number;
  /** The request id of a server fault (5xx), which finds its log line. */
  readonly requestId?: string;
  /** Seconds the daemon asked to wait before a retry (Retry-After), if any. */
  readonly retryAfter?: number;

  constructor(code: ErrorCode, message: string, status = 0, requestId?: string, retryAfter?: number) {
    super(message);
    this.name = new.target.name;
    this.code = code;
    this.status = status;
    this.requestId = requestId;
    this.retryAfter = retryAfter;
  }
}

export class NotFoundError extends SandlotError {}
export class InvalidArgumentError extends SandlotError {}
export class AlreadyExistsError extends SandlotError {}
export class FailedPreconditionError extends SandlotError {}
export class ResourceExhaustedError extends SandlotError {}
export class UnavailableError extends SandlotError {}
export class DeadlineExceededError extends SandlotError {}
export class PermissionDeniedError extends SandlotError {}
export class UnauthenticatedError extends SandlotError {}
export class InternalError extends SandlotError {}

/** VersionMismatchError: the daemon's release is not the one this SDK was released with. */
export class VersionMismatchError extends FailedPreconditionError {}

const classes: Record<ErrorCode, new (...a: ConstructorParameters<typeof SandlotError>) => SandlotError> = {
  not_found: NotFoundError,
  invalid_argument: InvalidArgumentError,
  already_exists: AlreadyExistsError,
  failed_precondition: FailedPreconditionError,
  resource_exhausted: ResourceExhaustedError,
  unavailable: UnavailableError,
  deadline_exceeded: DeadlineExceededError,
  permission_denied: PermissionDeniedError,
  unauthenticated: UnauthenticatedError,
  internal: InternalError,
};

/** The category of an HTTP status when the body names none (a proxy's answer). */
function codeOfStatus(status: number): ErrorCode {
  switch (status) {
    case 400: case 405: case 411: case 413: case 415: return status === 413 ? "resource_exhausted" : "invalid_argument";
    case 401: return "unauthenticated";
    case 403: return "permission_denied";
    case 404: return "not_found";
    case 408: case 504: return "deadline_exceeded";
    case 409: return "already_exists";
    case 412: return "failed_precondition";
    case 429: return "resource_exhausted";
    case 502: case 503: return "unavailable";
    default: return "internal";
  }
}

/** makeError builds the typed error of a category. */
export function makeError(code: string, message: string, status = 0, requestId?: string, retryAfter?: number): SandlotError {
  const known = (code in classes ? code : codeOfStatus(status)) as ErrorCode;
  return new classes[known](known, message, status, requestId, retryAfter);
}

/** errorFromResponse reads a non-2xx answer's {code, message, requestId}. */
export async function errorFromResponse(res: Response): Promise<SandlotError> {
  const text = await res.text().catch(() => "");
  let body: { code?: string; message?: string; requestId?: string } = {};
  try {
    body = JSON.parse(text);
  } catch {
    body = { message: text.slice(0, 500) || res.statusText };
  }
  const ra = res.headers.get("retry-after");
  const retryAfter = ra !== null && /^\d+$/.test(ra) ? Number(ra) : undefined;
  return makeError(body.code ?? "", body.message ?? res.statusText, res.status,
    body.requestId ?? res.headers.get("x-request-id") ?? undefined, retryAfter);
}
