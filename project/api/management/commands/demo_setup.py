"""Load the demo policies and create (or reset) the demo admin login."""

import secrets

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from project.api.demo_policies import DEMO_POLICIES
from ratelimits.models import Policy


class Command(BaseCommand):
    help = "Create the demo policies that are missing and an admin login with a new password."

    def add_arguments(self, parser):  # type: ignore[no-untyped-def]
        parser.add_argument("--username", default="admin", help="Admin username (default: admin).")

    def handle(self, *args, username: str, **options):  # type: ignore[no-untyped-def]
        for fields in DEMO_POLICIES:
            policy = Policy(**fields)
            if Policy.objects.filter(name=policy.name).exists():
                continue
            policy.full_clean()
            policy.save()
            self.stdout.write(f"Created policy {policy.name}: {policy.rate_display}.")
        password = secrets.token_urlsafe(12)
        user, _ = get_user_model().objects.get_or_create(username=username)
        user.is_staff = user.is_superuser = True
        user.set_password(password)
        user.save()
        self.stdout.write(self.style.SUCCESS(f"Admin login: {username} / {password}"))
