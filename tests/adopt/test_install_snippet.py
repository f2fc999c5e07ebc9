"""The README's Install settings, pasted at the end of an existing project's settings, add
to its apps, middleware, caches and DRF settings and replace none of them; on a project
fresh from startproject they make what is missing."""

from __future__ import annotations

from typing import Any

from tests.integration.test_fresh_project import blocks, install_section


def pasted(settings: dict[str, Any]) -> dict[str, Any]:
    """``settings`` (a settings module's globals) once the README's block has run in it."""
    block = blocks(install_section(), "python")[0]
    exec(block, settings)  # the README's own text, run as a settings module runs it
    return settings


def test_an_existing_projects_caches_and_rest_framework_are_added_to_not_replaced():
    own_cache = {"BACKEND": "django_redis.cache.RedisCache", "LOCATION": "redis://cache:6379/1"}
    settings = pasted(
        {
            "INSTALLED_APPS": ["django.contrib.admin", "rest_framework"],
            "MIDDLEWARE": ["django.middleware.common.CommonMiddleware"],
            "CACHES": {"default": own_cache, "sessions": {"BACKEND": "x"}},
            "REST_FRAMEWORK": {
                "DEFAULT_THROTTLE_CLASSES": ("rest_framework.throttling.UserRateThrottle",),
                "DEFAULT_THROTTLE_RATES": {"user": "100/hour"},
                "PAGE_SIZE": 20,
            },
        }
    )
    assert settings["INSTALLED_APPS"] == ["django.contrib.admin", "rest_framework", "ratelimits"]
    assert settings["CACHES"] == {"default": own_cache, "sessions": {"BACKEND": "x"}}
    assert settings["REST_FRAMEWORK"] == {
        "DEFAULT_THROTTLE_CLASSES": [
            "rest_framework.throttling.UserRateThrottle",
            "ratelimits.throttling.PolicyThrottle",
        ],
        "DEFAULT_THROTTLE_RATES": {"user": "100/hour"},
        "PAGE_SIZE": 20,
    }
    assert settings["MIDDLEWARE"][-1] == "ratelimits.middleware.RateLimitMiddleware"


def test_a_fresh_project_gets_the_redis_cache_and_the_throttle():
    settings = pasted({"INSTALLED_APPS": ["django.contrib.admin"], "MIDDLEWARE": []})
    assert settings["CACHES"]["default"]["BACKEND"] == "django_redis.cache.RedisCache"
    assert settings["REST_FRAMEWORK"] == {
        "DEFAULT_THROTTLE_CLASSES": ["ratelimits.throttling.PolicyThrottle"]
    }
    assert settings["INSTALLED_APPS"][-2:] == ["rest_framework", "ratelimits"]
