from django.apps import AppConfig


class SandboxesConfig(AppConfig):
    name = "portal.sandboxes"
    label = "sandboxes"

    def ready(self) -> None:
        """Signing out forgets the person in this process's gate at once (other processes within
        the gate's few seconds): a reload right after signing out no longer opens a sandbox."""
        from django.contrib.auth.signals import user_logged_out

        from portal.sandboxes.gate import gate_forget_person

        def signed_out(sender, request, user, **kwargs) -> None:
            if user is not None:
                gate_forget_person(user.pk)

        user_logged_out.connect(signed_out, dispatch_uid="portal.sandboxes.signed_out", weak=False)
