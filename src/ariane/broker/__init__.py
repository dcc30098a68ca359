"""RocketMQ's ``broker``."""
