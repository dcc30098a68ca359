"""Offline tools for store directories: ``ariane store dump`` and ``ariane store verify``."""
