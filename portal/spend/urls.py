from django.urls import path

from portal.spend import views

urlpatterns = [path("spend/", views.spend, name="spend")]
