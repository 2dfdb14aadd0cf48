from django.contrib.auth import views as auth_views
from django.urls import path

from portal.accounts import views

urlpatterns = [
    path(
        "login/",
        auth_views.LoginView.as_view(
            redirect_authenticated_user=True, template_name="registration/login.html"
        ),
        name="login",
    ),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("tokens/", views.tokens, name="tokens"),
    path("tokens/<int:pk>/revoke/", views.token_revoke_view, name="token-revoke"),
    path("notifications/read/", views.notifications_read, name="notifications-read"),
    path("teams/<slug:slug>/settings/", views.team_settings, name="team-settings"),
]
