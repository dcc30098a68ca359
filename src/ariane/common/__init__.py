"""RocketMQ's ``common`` module: the message model and shared constants. No I/O."""
