"""Load the demo policies and overrides, create (or reset) the demo admin login, and send
a little traffic through the site so that the policies' Traffic panels have something to
show at first sight."""

import logging
import secrets

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand
from django.test import Client

from project.api.demo_policies import DEMO_GROUP_OVERRIDES, DEMO_POLICIES
from ratelimits.models import Policy, PolicyOverride


class Command(BaseCommand):
    help = "Create the demo policies that are missing and an admin login with a new password."

    def add_arguments(self, parser):  # type: ignore[no-untyped-def]
        parser.add_argument("--username", default="admin", help="Admin username (default: admin).")
        parser.add_argument(
            "--no-traffic", action="store_true", help="Send no demo traffic through the API."
        )

    def handle(self, *args, username: str, no_traffic: bool = False, **options):  # type: ignore[no-untyped-def]
        for fields in DEMO_POLICIES:
            policy = Policy(**fields)
            if Policy.objects.filter(name=policy.name).exists():
                continue
            policy.full_clean()
            policy.save()
            self.stdout.write(f"Created policy {policy.name}: {policy.rate_display}.")
        for policy_name, group_name, fields in DEMO_GROUP_OVERRIDES:
            group, _ = Group.objects.get_or_create(name=group_name)
            policy = Policy.objects.filter(name=policy_name).first()
            if policy is None or PolicyOverride.objects.filter(policy=policy, group=group).exists():
                continue
            override = PolicyOverride(policy=policy, group=group, **fields)
            override.full_clean()
            override.save()
            self.stdout.write(f"Created override on {policy_name}: {override}.")
        if not no_traffic:
            self.send_traffic()
        password = secrets.token_urlsafe(12)
        user, _ = get_user_model().objects.get_or_create(username=username)
        user.is_staff = user.is_superuser = True
        user.set_password(password)
        user.save()
        self.stdout.write(self.style.SUCCESS(f"Admin login: {username} / {password}"))

    def send_traffic(self) -> None:
        """GET /api/search/ from 40 documentation addresses at rates from 1 to 19 per
        minute, and one client far over the limit: real requests through the real
        limiter, which keeps the traffic record (sent to Redis when this command exits)."""
        client = Client()
        sent = 0
        quiet = logging.getLogger("django.request")
        level, quiet.level = quiet.level, logging.ERROR  # the abuser's 429s are expected
        for i in range(40):
            for _ in range(1 + (i * i) % 19):
                client.get("/api/search/", REMOTE_ADDR=f"198.51.100.{i + 1}")
                sent += 1
        for _ in range(45):
            client.get("/api/search/", REMOTE_ADDR="203.0.113.66")
            sent += 1
        quiet.setLevel(level)
        self.stdout.write(f"Sent {sent} demo requests to /api/search/ (see its Traffic panel).")
