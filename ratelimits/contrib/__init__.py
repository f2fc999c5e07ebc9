"""Faces for third-party frameworks (django-ninja)."""
