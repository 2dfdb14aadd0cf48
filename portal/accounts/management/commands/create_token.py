from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from portal.accounts.models import ApiToken, User
from portal.accounts.services import token_create
from portal.core.errors import DomainError


class Command(BaseCommand):
    help = "Create a personal access token for a user; prints the token alone on the last line."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--expires-days", type=int, default=None)
        parser.add_argument("--name", default="cli")
        parser.add_argument(
            "--scope",
            default="workloads",
            choices=ApiToken.Scope.values,
            help="what the token may do (serving: call one team's model endpoints only)",
        )
        parser.add_argument("--team", default="", help="a serving token's team (slug)")

    def handle(self, *args, username: str, expires_days: int | None, name: str, **options):
        user = User.objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"No user called {username!r}.")
        try:
            token, raw = token_create(
                user=user, name=name, expires_days=expires_days, scope=options["scope"], team=options["team"]
            )
        except DomainError as error:
            raise CommandError(error.message) from None
        expiry = f", expires {token.expires_at:%Y-%m-%d %H:%M} UTC" if token.expires_at else ", never expires"
        self.stderr.write(f"Token {token.name!r} for {username}{expiry}. It is shown only now:")
        self.stdout.write(raw)
