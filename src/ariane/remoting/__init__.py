"""RocketMQ's ``remoting``."""
