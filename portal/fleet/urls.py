from django.urls import path

from portal.fleet import views

urlpatterns = [
    path("fleet/", views.fleet, name="fleet"),
    path("fleet/discover/", views.discover, name="fleet-discover"),
    path("fleet/nodes/<int:pk>/take-over/", views.node_take_over, name="fleet-node-take-over"),
    path("fleet/orphans/<int:pk>/remove/", views.orphan_remove, name="fleet-orphan-remove"),
    path("fleet/orphans/<int:pk>/keep/", views.orphan_keep_view, name="fleet-orphan-keep"),
]
