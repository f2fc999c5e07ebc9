from django.apps import AppConfig


class ApiConfig(AppConfig):
    name = "project.api"
    label = "demo_api"
