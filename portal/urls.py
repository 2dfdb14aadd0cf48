from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
    path("api/v1/", include("portal.api_urls")),
    path("", include("portal.observability.urls")),
    path("", include("portal.web_urls")),
]

# A request Django refuses before any view (a body too large, too many fields): the API's error
# shape on /api/ paths, Django's page elsewhere.
handler400 = "portal.core.views.bad_request"
