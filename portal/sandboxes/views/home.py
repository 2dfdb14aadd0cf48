"""The user's home page: their persistent home volume, its size and use, growing it, deleting it."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_GET, require_POST

from portal.core.views import login_required, page
from portal.core.web import form_refused, run_service, typed_keep, typed_take
from portal.sandboxes.forms import HomeDeleteForm, HomeResizeForm
from portal.sandboxes.selectors import home_facts, home_holder
from portal.sandboxes.services import home_delete, home_resize


@login_required
@require_GET
def home_page(request: HttpRequest) -> HttpResponse:
    facts = home_facts(user=request.user)
    typed = typed_take(request, "home-grow")  # a refused size, to correct rather than type again
    initial = {"size_gb": typed or ((facts.home.size_gb + 50) if facts.home else None)}
    context = {
        "facts": facts,
        "resize_form": HomeResizeForm(initial=initial),
        "delete_form": HomeDeleteForm(),
    }
    return page(request, "sandboxes/home.html", context)


@login_required
@require_POST
def home_resize_posted(request: HttpRequest) -> HttpResponse:
    form = HomeResizeForm(request.POST)
    home = None
    if not form_refused(request, form):
        size = form.cleaned_data["size_gb"]
        home = run_service(request, lambda: home_resize(user=request.user, size_gb=size))
        if home is not None:
            held = home_holder(home) is not None
            when = "now, in the sandbox that holds it" if held else "when a sandbox next holds it"
            messages.success(
                request, f"Your home grows to {size} GB: billed so from now, the volume grows {when}."
            )
    if home is None:
        typed_keep(request, "home-grow", request.POST.get("size_gb", "")[:20])
    return redirect("home")


@login_required
@require_POST
def home_delete_posted(request: HttpRequest) -> HttpResponse:
    form = HomeDeleteForm(request.POST)
    if not form_refused(request, form):
        run_service(
            request,
            lambda: home_delete(user=request.user, confirm=form.cleaned_data["confirm"]),
            success="Your home is being deleted; billing stopped now. Your next sandbox makes a new one.",
        )
    return redirect("home")
