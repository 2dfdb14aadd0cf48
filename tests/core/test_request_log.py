"""The embedded server logs requests that went wrong, not every poll (PORTAL_REQUEST_LOG_LEVEL)."""

from __future__ import annotations

import logging


def test_the_access_log_keeps_only_client_and_server_errors_by_default():
    access = logging.getLogger("django.server")
    assert not access.isEnabledFor(logging.INFO)  # "GET /sandboxes/7/status 200" every few seconds
    assert access.isEnabledFor(logging.WARNING)  # 4xx
    assert access.isEnabledFor(logging.ERROR)  # 5xx
