from django.urls import path

from portal.search import api

urlpatterns = [path("search", api.SearchView.as_view(), name="api-search")]
