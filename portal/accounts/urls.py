from django.urls import path

from portal.accounts import views
from portal.accounts.oidc import PortalLogoutView

urlpatterns = [
    path("login/", views.PortalLoginView.as_view(), name="login"),
    path("logout/", PortalLogoutView.as_view(), name="logout"),
    path("tokens/", views.tokens, name="tokens"),
    path("tokens/<int:pk>/revoke/", views.token_revoke_view, name="token-revoke"),
    path("ssh-keys/", views.ssh_keys_page, name="ssh-keys"),
    path("ssh-keys/<int:pk>/remove/", views.ssh_key_remove_view, name="ssh-key-remove"),
    path("notifications/", views.notifications_page, name="notifications"),
    path("notifications/read/", views.notifications_read, name="notifications-read"),
    path("notifications/<int:pk>/read/", views.notification_read, name="notification-read"),
    path("notifications/preferences/", views.notification_preferences, name="notification-preferences"),
    path("teams/<slug:slug>/settings/", views.team_settings, name="team-settings"),
]
