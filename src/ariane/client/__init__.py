"""RocketMQ's ``client``."""
