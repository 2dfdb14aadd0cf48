from django.apps import AppConfig


class ApprovalsConfig(AppConfig):
    name = "portal.approvals"
    label = "approvals"
