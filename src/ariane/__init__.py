"""Ariane: a message broker in Python implementing Apache RocketMQ's design and protocols."""

__version__ = "0.1.0"

__all__ = ["__version__"]
