from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from portal.core.views import favicon

urlpatterns = [
    path("admin/", admin.site.urls),
    path("favicon.ico", favicon),
    # Single sign-on (OpenID Connect): its redirect URI is <PORTAL_BASE_URL>/oidc/callback/.
    path("oidc/", include("mozilla_django_oidc.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    # Swagger UI with its start-up script served apart (?script) and no inline style: the strict
    # Content Security Policy holds on this page too.
    path(
        "api/docs/",
        SpectacularSwaggerSplitView.as_view(url_name="schema", template_name="api/swagger_ui.html"),
        name="api-docs",
    ),
    path("api/v1/", include("portal.api_urls")),
    path("", include("portal.observability.urls")),
    path("", include("portal.web_urls")),
]

# A request Django refuses before any view (a body too large, too many fields): the API's error
# shape on /api/ paths, Django's page elsewhere.
handler400 = "portal.core.views.bad_request"
# A path that names no route: the API's error shape on /api/ paths too.
handler404 = "portal.core.views.page_not_found"
# An error no view handled: the API's error shape on /api/ paths, a page that needs no database elsewhere.
handler500 = "portal.core.views.server_error"
