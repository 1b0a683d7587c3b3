// The daemon's errors as typed exceptions.
//
// Every answer of paddock's API is an envelope: {"ok":true,"data":…} or
// {"ok":false,"error":{"code","message","details"}}. A failure becomes a
// PaddockError (or the subclass for its code), so that a caller branches
// with `instanceof` or on `err.code`; what failed on the way to the daemon
// (nothing listening, a dropped connection) is a TransportError instead.

import type { components } from "./schema.js";

/** The stable, machine-readable error codes of the action protocol (error.go's paddock.Code). */
export type ErrorCode = components["schemas"]["Error"]["code"];

/** Every code, in error.go's order. The list is closed: adding one is an API change. */
export const errorCodes: readonly ErrorCode[] = [
  "bad_request",
  "not_found",
  "conflict",
  "busy",
  "unauthorized",
  "forbidden",
  "unsupported",
  "run_mismatch",
  "not_bootstrapped",
  "attribution_leak",
  "too_large",
  "node_lost",
  "internal",
] as const;

/** The public details of an error; "rule" names the policy that refused (protected_path, read_only, …), "key" a refused field. */
export type ErrorDetails = Record<string, unknown> & { rule?: string; key?: string };

/**
 * An error the daemon answered with. `code` is stable; `message` is for
 * people; `details` carries what a client may branch on (details.rule).
 * `status` is the HTTP status it came with (0 inside a stream, where the
 * status was already 200).
 */
export class PaddockError extends Error {
  readonly code: ErrorCode;
  readonly details: ErrorDetails;
  readonly status: number;

  constructor(code: ErrorCode, message: string, details?: ErrorDetails, status = 0) {
    super(message);
    this.code = code;
    this.details = details ?? {};
    this.status = status;
  }

  /** The policy that refused, if one did (details.rule). */
  get rule(): string | undefined {
    return typeof this.details.rule === "string" ? this.details.rule : undefined;
  }

  override toString(): string {
    return `${this.name} ${this.code}: ${this.message}`;
  }
}

/** The input is wrong; nothing changed. details.key names a refused field. */
export class BadRequestError extends PaddockError { override readonly code = "bad_request" as const; }
/** No such project, run or object. */
export class NotFoundError extends PaddockError { override readonly code = "not_found" as const; }
/** The object's state forbids this (an illegal transition, a retained workspace, a stale hash). */
export class ConflictError extends PaddockError { override readonly code = "conflict" as const; }
/** Someone else holds what this needs (the project lock, a running job). */
export class BusyError extends PaddockError { override readonly code = "busy" as const; }
/** No credential, or one paddock does not know. */
export class UnauthorizedError extends PaddockError { override readonly code = "unauthorized" as const; }
/** The caller, known, may not do this. */
export class ForbiddenError extends PaddockError { override readonly code = "forbidden" as const; }
/** This machine or build cannot do this. */
export class UnsupportedError extends PaddockError { override readonly code = "unsupported" as const; }
/** A credential of one run used on another. */
export class RunMismatchError extends PaddockError { override readonly code = "run_mismatch" as const; }
/** An action on a run that was never bootstrapped. */
export class NotBootstrappedError extends PaddockError { override readonly code = "not_bootstrapped" as const; }
/** The attribution lint refused a submission. */
export class AttributionLeakError extends PaddockError { override readonly code = "attribution_leak" as const; }
/** The input is over a size limit or quota; nothing was written. */
export class TooLargeError extends PaddockError { override readonly code = "too_large" as const; }
/** The node that holds the run lost its lease; another may adopt the run. */
export class NodeLostError extends PaddockError { override readonly code = "node_lost" as const; }
/** A fault of paddock's; the message carries a correlation id for the daemon's log. */
export class InternalError extends PaddockError { override readonly code = "internal" as const; }

const classes: Record<ErrorCode, new (code: ErrorCode, message: string, details?: ErrorDetails, status?: number) => PaddockError> = {
  bad_request: BadRequestError,
  not_found: NotFoundError,
  conflict: ConflictError,
  busy: BusyError,
  unauthorized: UnauthorizedError,
  forbidden: ForbiddenError,
  unsupported: UnsupportedError,
  run_mismatch: RunMismatchError,
  not_bootstrapped: NotBootstrappedError,
  attribution_leak: AttributionLeakError,
  too_large: TooLargeError,
  node_lost: NodeLostError,
  internal: InternalError,
};

// Each class's name is its own (for stacks and util.inspect), set once on its prototype.
for (const cls of [PaddockError, ...Object.values(classes)]) {
  Object.defineProperty(cls.prototype, "name", { value: cls.name, configurable: true, writable: true });
}

/**
 * The error for a wire error object ({code, message, details}): the
 * subclass of its code, or a plain PaddockError for a code this SDK does
 * not know (a newer daemon's).
 */
export function paddockError(wire: { code?: unknown; message?: unknown; details?: unknown }, status = 0): PaddockError {
  const code = String(wire.code ?? "internal") as ErrorCode;
  const message = typeof wire.message === "string" ? wire.message : "";
  const details = wire.details && typeof wire.details === "object" ? (wire.details as ErrorDetails) : undefined;
  const cls = classes[code];
  return cls ? new cls(code, message, details, status) : new PaddockError(code, message, details, status);
}

/** Whether err is a PaddockError, of code if one is given. */
export function isPaddockError(err: unknown, code?: ErrorCode): err is PaddockError {
  return err instanceof PaddockError && (code === undefined || err.code === code);
}

/**
 * Something failed on the way to or from the daemon: it could not be
 * reached (`unreachable`), it closed the connection mid-answer, or it
 * answered with something that is not paddock's envelope.
 */
export class TransportError extends Error {
  /** No daemon answered at all: nothing listens on the socket or port. */
  readonly unreachable: boolean;
  constructor(message: string, options?: { cause?: unknown; unreachable?: boolean }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = "TransportError";
    this.unreachable = options?.unreachable ?? false;
  }
}

/** Whether a low-level error means nothing listens where the daemon should. */
export function isUnreachable(err: unknown): boolean {
  for (let e: any = err; e; e = e.cause) {
    if (["ECONNREFUSED", "ENOENT", "UND_ERR_CONNECT_TIMEOUT"].includes(e.code)) return true;
  }
  return false;
}
