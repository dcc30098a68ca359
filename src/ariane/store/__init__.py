"""RocketMQ's ``store``."""
