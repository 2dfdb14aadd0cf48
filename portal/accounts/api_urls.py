from django.urls import path

from portal.accounts import api

urlpatterns = [
    path("tokens", api.TokenListView.as_view(), name="api-tokens"),
    path("tokens/<int:pk>/revoke", api.TokenRevokeView.as_view(), name="api-token-revoke"),
    path("ssh-keys", api.SshKeyListView.as_view(), name="api-ssh-keys"),
    path("ssh-keys/<int:pk>", api.SshKeyDetailView.as_view(), name="api-ssh-key"),
    path("teams/<slug:slug>/settings", api.TeamSettingsView.as_view(), name="api-team-settings"),
    path("teams/<slug:slug>/deliveries", api.TeamDeliveriesView.as_view(), name="api-team-deliveries"),
    path("notifications/deliveries", api.MyDeliveriesView.as_view(), name="api-my-deliveries"),
    path("notifications", api.NotificationListView.as_view(), name="api-notifications"),
    path("notifications/<int:pk>/read", api.NotificationReadView.as_view(), name="api-notification-read"),
    path("notifications/read-all", api.NotificationReadAllView.as_view(), name="api-notifications-read-all"),
    path(
        "notifications/preferences",
        api.NotificationPreferencesView.as_view(),
        name="api-notification-preferences",
    ),
]
