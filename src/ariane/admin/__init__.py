"""RocketMQ's ``admin``."""
