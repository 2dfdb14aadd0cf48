from django.urls import path

from portal.catalog import views

urlpatterns = [
    path("catalog/", views.catalog, name="catalog"),
    path("catalog/<str:slug>/", views.catalog_model, name="catalog-model"),
]
