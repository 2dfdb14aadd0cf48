"""Reads the sandbox API needs beyond `selectors`: one sandbox with everything it shows."""

from __future__ import annotations

from portal.accounts.models import User
from portal.core.errors import NotFound
from portal.sandboxes.models import Sandbox
from portal.sandboxes.selectors import sandboxes_visible_to, sandboxes_with_details


def sandbox_detail_for(*, user: User, sandbox_id: int) -> Sandbox:
    """One sandbox the user may see, with allocations and approvals prefetched; else NotFound."""
    sandbox = sandboxes_with_details(sandboxes_visible_to(user)).filter(pk=sandbox_id).first()
    if sandbox is None:
        raise NotFound(f"No sandbox {sandbox_id} that you can see.")
    return sandbox
