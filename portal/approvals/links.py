"""The page a lead's signed one-time approve or reject link opens (see portal.accounts.action_links).

The link decides nothing by itself: it opens a confirmation page, signed in as the lead it was
made for (anyone else, or a used, expired or altered link, gets a 404), and the decision is the
POST of that page, with its CSRF token. Confirming uses the link up.
"""

from __future__ import annotations

from django.contrib import messages
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_http_methods

from portal.accounts.action_links import action_token_read, action_token_use
from portal.approvals.selectors import approval_get_for, approval_rows
from portal.approvals.services import approval_decide
from portal.core.errors import DomainError, NotFound
from portal.core.views import login_required, page


@login_required
@require_http_methods(["GET", "POST"])
def approval_act(request: HttpRequest, pk: int, token: str) -> HttpResponse:
    """GET: what the link would do, with a button to confirm. POST: do it, once."""
    try:
        action = action_token_read(token=token, approval_id=pk, lead_id=request.user.pk)
        approval = approval_get_for(user=request.user, approval_id=pk)
    except NotFound as missing:
        raise Http404(missing.message) from missing
    error = ""
    if request.method == "POST":
        comment = request.POST.get("comment", "")
        try:
            with transaction.atomic():
                action_token_use(token=token)
                approval_decide(
                    user=request.user, approval_id=pk, approve=action == "approve", comment=comment
                )
        except NotFound as missing:
            raise Http404(missing.message) from missing
        except DomainError as failure:
            error = failure.message
        else:
            messages.success(request, f"Request {'approved' if action == 'approve' else 'rejected'}.")
            return redirect("approvals")
    row = approval_rows([approval], user=request.user)[0]
    context = {"row": row, "action": action, "token": token, "error": error}
    return page(request, "notifications/approval_act.html", context, status=400 if error else 200)
