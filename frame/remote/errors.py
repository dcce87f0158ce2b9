"""The one error a remote render raises: "paint on the frame instead", with a reason the owner reads.

Every way a LAN render server can fail — not there, too slow, an error page, a broken or wrong-sized
picture, gone in the middle of the job — ends in ``RemoteUnavailable``. The render worker catches
this single class and falls back to the on-device pipeline in the same render window; ``reason`` is a
short fixed code for logs and tests, ``str(exc)`` the sentence shown to the owner. Messages never
carry credentials: the server is named by its redacted URL and every quoted text is redacted.
"""

from __future__ import annotations

from frame.errors import FrameError
from frame.redact import redact_text

# reason codes (stable: tests, logs and the daemon's status may match on them)
NOT_CONFIGURED = "not-configured"
REFUSED = "refused"            # nothing listens there (connection refused, unknown host, no route)
TIMEOUT = "timeout"            # no complete answer before a deadline (connect, job, or a slow drip)
AUTH = "auth"                  # 401/403: wrong or missing user/password/token
SERVER_ERROR = "server-error"  # HTTP 5xx
REJECTED = "rejected"          # HTTP 4xx other than auth (e.g. 422: a parameter the server refuses)
BAD_RESPONSE = "bad-response"  # not the A1111 JSON (no "images", not JSON at all)
BAD_IMAGE = "bad-image"        # the picture does not decode: not base64, not an image, truncated
WRONG_SIZE = "wrong-size"      # the picture decodes but is not the size asked for
DIED = "died"                  # the server went away while the job ran


class RemoteUnavailable(FrameError):
    """The remote render cannot deliver tonight's picture; the caller paints on the device instead."""

    def __init__(self, reason: str, message: str, server: str = "") -> None:
        self.reason = reason
        self.server = server  # already redacted
        self.detail = redact_text(message)
        where = f"render server {server}" if server else "render server"
        super().__init__(f"{where}: {self.detail}")

    def at(self, server: str) -> RemoteUnavailable:
        """The same failure naming ``server`` (a parser raises it without knowing which server answered)."""
        return RemoteUnavailable(self.reason, self.detail, server)
