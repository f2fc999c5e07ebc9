"""The demo's plain Django pages: Django's own login view and an async view."""
