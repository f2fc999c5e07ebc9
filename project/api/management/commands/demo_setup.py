"""Load the demo policies and overrides and create (or reset) the demo admin login."""

import secrets

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand

from project.api.demo_policies import DEMO_GROUP_OVERRIDES, DEMO_POLICIES
from ratelimits.models import Policy, PolicyOverride


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
        for policy_name, group_name, fields in DEMO_GROUP_OVERRIDES:
            group, _ = Group.objects.get_or_create(name=group_name)
            policy = Policy.objects.filter(name=policy_name).first()
            if policy is None or PolicyOverride.objects.filter(policy=policy, group=group).exists():
                continue
            override = PolicyOverride(policy=policy, group=group, **fields)
            override.full_clean()
            override.save()
            self.stdout.write(f"Created override on {policy_name}: {override}.")
        password = secrets.token_urlsafe(12)
        user, _ = get_user_model().objects.get_or_create(username=username)
        user.is_staff = user.is_superuser = True
        user.set_password(password)
        user.save()
        self.stdout.write(self.style.SUCCESS(f"Admin login: {username} / {password}"))
