from django.urls import path

from portal.accounts import api

urlpatterns = [
    path("tokens", api.TokenListView.as_view(), name="api-tokens"),
    path("tokens/<int:pk>/revoke", api.TokenRevokeView.as_view(), name="api-token-revoke"),
]
