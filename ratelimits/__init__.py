"""Rate limits for Django REST framework, stored as data and enforced in Redis."""

__version__ = "0.1.0"
