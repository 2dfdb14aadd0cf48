from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "portal.accounts"
    label = "accounts"

    def ready(self) -> None:
        from django.contrib.auth.signals import user_logged_out

        from portal.accounts.services import user_signed_out

        def signed_out(sender, request, user, **kwargs) -> None:
            if user is not None:  # None: signing out without a session
                user_signed_out(user=user)

        user_logged_out.connect(signed_out, dispatch_uid="portal.accounts.signed_out", weak=False)
