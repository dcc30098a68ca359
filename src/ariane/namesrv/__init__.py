"""RocketMQ's ``namesrv``."""
