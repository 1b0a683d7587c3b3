"""paddock's errors, one exception class per error code.

Every answer of the daemon that is not a success carries an envelope
{"ok": false, "error": {"code", "message", "details"}}; the client raises
the class of its code (NotFound for not_found, …), all of them
PaddockError. A code this version does not know raises PaddockError
itself, with the code as sent. Failures to reach the daemon, or answers
that are not paddock's, are TransportError and DecodeError.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Type


class PaddockError(Exception):
    """An error the daemon answered with: code, message and details are
    what it sent (details.rule names the policy that refused, if one did);
    status is the HTTP status, or None for an error inside a stream."""

    code: str = ""

    def __init__(self, code: str, message: str, details: Optional[Dict[str, Any]] = None, status: Optional[int] = None):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.details = details or {}
        self.status = status

    @property
    def rule(self) -> Optional[str]:
        """The rule that refused (protected_path, read_only, …), if any."""
        r = self.details.get("rule")
        return r if isinstance(r, str) else None

    @property
    def undone(self) -> bool:
        """Whether the daemon says nothing of the call was done
        (details.done is False): it may be made again as it is, and the
        clients do so by themselves a few times (retries=)."""
        return self.details.get("done") is False


class BadRequest(PaddockError):
    """bad_request: the input is wrong; nothing changed."""
    code = "bad_request"


class NotFound(PaddockError):
    """not_found: no such project, run or object."""
    code = "not_found"


class Conflict(PaddockError):
    """conflict: the object's state forbids this."""
    code = "conflict"


class Busy(PaddockError):
    """busy: someone else holds what this needs (the project lock, a running job)."""
    code = "busy"


class Unauthorized(PaddockError):
    """unauthorized: no credential, or one paddock does not know."""
    code = "unauthorized"


class Forbidden(PaddockError):
    """forbidden: the caller, known, may not do this."""
    code = "forbidden"


class Unsupported(PaddockError):
    """unsupported: this machine or build cannot do this."""
    code = "unsupported"


class RunMismatch(PaddockError):
    """run_mismatch: a credential of one run used on another."""
    code = "run_mismatch"


class NotBootstrapped(PaddockError):
    """not_bootstrapped: an action on a run that was never bootstrapped."""
    code = "not_bootstrapped"


class AttributionLeak(PaddockError):
    """attribution_leak: the attribution lint refused a submission."""
    code = "attribution_leak"


class TooLarge(PaddockError):
    """too_large: the input is over a size limit or quota; nothing was written."""
    code = "too_large"


class NodeLost(PaddockError):
    """node_lost: the node holding the run lost its lease; another may adopt it."""
    code = "node_lost"


class Internal(PaddockError):
    """internal: a fault of paddock's; the message has a correlation id for its log."""
    code = "internal"


ERRORS: Dict[str, Type[PaddockError]] = {c.code: c for c in (
    BadRequest, NotFound, Conflict, Busy, Unauthorized, Forbidden, Unsupported, RunMismatch,
    NotBootstrapped, AttributionLeak, TooLarge, NodeLost, Internal)}


def from_wire(error: Any, status: Optional[int] = None) -> PaddockError:
    """The exception for an envelope's error object."""
    if not isinstance(error, dict) or not isinstance(error.get("code"), str):
        return PaddockError("internal", f"an error the client cannot read: {error!r}", None, status)
    cls = ERRORS.get(error["code"], PaddockError)
    details = error.get("details") if isinstance(error.get("details"), dict) else None
    return cls(error["code"], str(error.get("message", "")), details, status)


class TransportError(Exception):
    """The daemon could not be reached, or the connection failed."""


class DecodeError(Exception):
    """An answer that is not what the API document says it is."""
