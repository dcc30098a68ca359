"""The public surface of ariane.client is pinned."""

from __future__ import annotations

import ariane
import ariane.client


def test_client_exports() -> None:
    assert sorted(ariane.client.__all__) == sorted(
        [
            "DEFAULT_PRODUCER_GROUP", "Admin", "BrokerNotFoundError", "BrokerResponseError",
            "ClientConfig", "ClientInstance", "ClientStateError", "ConsumerMember",
            "LocalTransaction", "LocalTransactionState", "Message", "MessageExt",
            "MessageQueue", "MessageQueueSelector", "NoRouteError", "Producer",
            "ProducerMember", "PullResult", "PullStatus", "SelectMessageQueueByHash",
            "SelectMessageQueueByRandom", "SendError", "SendResult", "SendStatus", "SyncAdmin",
            "SyncProducer", "SyncTransactionProducer", "TransactionChecker",
            "TransactionProducer", "TransactionSendResult", "error_for",
            "AllocateMessageQueueAveragely", "AllocateMessageQueueAveragelyByCircle",
            "AllocateMessageQueueByConfig", "AllocateMessageQueueByMachineRoom",
            "AllocateMessageQueueConsistentHash", "AllocateStrategy", "PullConsumer",
            "LocalFileOffsetStore", "OffsetStore", "ReadOffsetType", "RemoteBrokerOffsetStore",
            "PushConsumer", "ConsumeConcurrentlyContext", "ConsumeConcurrentlyStatus",
            "ConsumeFromWhere", "ConsumeOrderlyContext", "ConsumeOrderlyStatus", "MessageModel",
            "MessageSelector", "SyncPullConsumer", "SyncPushConsumer",
            "AccessDeniedError", "AclConfig", "AclVersionInfo", "PlainAccessConfig",
            "SessionCredentials", "TopicNotWritableError", "NoPermissionError",
            "SimpleConsumer", "SyncSimpleConsumer",
        ]
    )  # fmt: skip
    for name in ariane.client.__all__:
        assert getattr(ariane.client, name) is not None


def test_top_level_reexports_resolve_to_the_client_objects() -> None:
    for name in ariane.__all__:
        if name != "__version__":
            assert getattr(ariane, name) is getattr(ariane.client, name)
