from django.urls import path

from portal.catalog import api

urlpatterns = [
    path("catalog/models", api.CatalogModelListView.as_view(), name="api-catalog-models"),
    path("catalog/models/<str:slug>", api.CatalogModelDetailView.as_view(), name="api-catalog-model"),
    path("catalog/models/<str:slug>/sizing", api.CatalogModelSizingView.as_view(), name="api-catalog-sizing"),
]
