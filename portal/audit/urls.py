from django.urls import path

from portal.audit import views

urlpatterns = [
    path("audit/", views.audit, name="audit"),
    path("audit/export.csv", views.audit_download, name="audit-export"),
]
