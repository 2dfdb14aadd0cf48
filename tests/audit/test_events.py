from __future__ import annotations

import pytest

from portal.audit.models import AuditEvent
from portal.audit.selectors import audit_events_visible_to
from portal.sandboxes.services import sandbox_request

pytestmark = pytest.mark.django_db


def test_audit_events_are_append_only(fleet, researcher, slice_request):
    sandbox_request(user=researcher, **slice_request)
    event = AuditEvent.objects.filter(action="sandbox.request").get()
    assert event.actor == researcher and event.to_state == "queued" and event.team.slug == "vision"
    event.detail = "rewritten"
    with pytest.raises(ValueError, match="append-only"):
        event.save()
    with pytest.raises(ValueError, match="append-only"):
        event.delete()


def test_leads_see_their_teams_events_and_researchers_none(
    fleet, researcher, lead, other_researcher, admin_user, slice_request
):
    sandbox_request(user=researcher, **slice_request)
    assert audit_events_visible_to(lead).filter(action="sandbox.request").count() == 1
    assert audit_events_visible_to(other_researcher).count() == 0
    assert audit_events_visible_to(researcher).count() == 0
    assert audit_events_visible_to(admin_user).count() >= 2
