"""``ariane admin <command>`` and the ``mqadmin`` console script.

How it works: a click group (RocketMQ ``MQAdminStartup``) whose commands live in one module
per family (topic, group, cluster, offsets, messages, namesrv, stats) and are imported only
when named, so ``mqadmin --help`` and every command start fast. Names are RocketMQ's and are
matched case-insensitively as ``mqadmin`` does; an unknown name is a one-line error.
"""

from __future__ import annotations

import importlib

import click

from ariane.admin.command import OneLineUsageError

__all__ = ["COMMANDS", "admin", "main"]

_T = "ariane.admin.topic"
_G = "ariane.admin.group"
_C = "ariane.admin.cluster"
_O = "ariane.admin.offsets"
_M = "ariane.admin.messages"
_N = "ariane.admin.namesrv"
_S = "ariane.admin.stats"
_TR = "ariane.admin.trace"
_A = "ariane.admin.acl"
_H = "ariane.admin.ha"
_D = "ariane.admin.dledger"
_Q = "ariane.admin.queue"
_P = "ariane.admin.probes"

#: command name -> (module, attribute, one-line summary)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "updateTopic": (_T, "update_topic", "Update or create a topic."),
    "deleteTopic": (_T, "delete_topic", "Delete a topic from brokers and NameServers."),
    "topicList": (_T, "topic_list", "Fetch all topics from the NameServer."),
    "topicRoute": (_T, "topic_route", "Examine a topic's route."),
    "topicStatus": (_T, "topic_status", "Examine a topic's queues (offsets, last update)."),
    "topicClusterList": (_T, "topic_cluster_list", "The clusters hosting a topic."),
    "updateTopicPerm": (_T, "update_topic_perm", "Update a topic's permission."),
    "updateSubGroup": (_G, "update_sub_group", "Update or create a subscription group."),
    "deleteSubGroup": (_G, "delete_sub_group", "Delete a subscription group from brokers."),
    "consumerConnection": (_G, "consumer_connection", "A consumer group's connections."),
    "producerConnection": (_G, "producer_connection", "A producer group's connections."),
    "consumerStatus": (_G, "consumer_status", "A consumer's own running information."),
    "clusterList": (_C, "cluster_list", "List clusters and brokers with their TPS."),
    "brokerStatus": (_C, "broker_status", "A broker's runtime statistics."),
    "getBrokerConfig": (_C, "get_broker_config", "A broker's settings."),
    "updateBrokerConfig": (_C, "update_broker_config", "Change (and persist) a broker setting."),
    "wipeWritePerm": (_C, "wipe_write_perm", "Remove a broker's write permission in routes."),
    "addWritePerm": (_C, "add_write_perm", "Give a broker its write permission back."),
    "cleanExpiredCQ": (_C, "clean_expired_cq", "Clean expired consume queues on brokers."),
    "deleteExpiredCommitLog": (
        _C,
        "delete_expired_commit_log",
        "Delete expired CommitLog files now.",
    ),
    "consumerProgress": (_O, "consumer_progress", "A consumer group's progress and lag."),
    "resetOffsetByTime": (_O, "reset_offset_by_time", "Reset a group's offsets to a time."),
    "skipAccumulatedMessage": (
        _O,
        "skip_accumulated_message",
        "Skip every message not consumed yet.",
    ),
    "cloneGroupOffset": (_O, "clone_group_offset", "Copy offsets from another group."),
    "queryMsgById": (_M, "query_msg_by_id", "Query a message by its offset message id."),
    "queryMsgByKey": (_M, "query_msg_by_key", "Query messages by key."),
    "queryMsgByUniqueKey": (_M, "query_msg_by_unique_key", "Query a message by unique key."),
    "queryMsgByOffset": (_M, "query_msg_by_offset", "Query a message by queue offset."),
    "printMsg": (_M, "print_msg", "Print the messages of a topic (optionally a time range)."),
    "sendMessage": (_M, "send_message", "Send a message."),
    "consumeMessage": (_M, "consume_message", "Consume (pull) messages without committing."),
    "queryMsgTraceById": (_TR, "query_msg_trace_by_id", "Query a message's trace."),
    "statsAll": (_S, "stats_all", "TPS and accumulation of every topic and group."),
    "brokerConsumeStats": (_S, "broker_consume_stats", "Consume stats of every group."),
    "getNamesrvConfig": (_N, "get_namesrv_config", "The NameServers' settings."),
    "updateNamesrvConfig": (_N, "update_namesrv_config", "Change NameServer settings."),
    "updateKvConfig": (_N, "update_kv_config", "Create or update a KV config entry."),
    "deleteKvConfig": (_N, "delete_kv_config", "Delete a KV config entry."),
    # ACL (issue 11)
    "updateAclConfig": (_A, "update_acl_config", "Create or update an ACL account on brokers."),
    "deleteAclConfig": (_A, "delete_acl_config", "Delete an ACL account from brokers."),
    "updateGlobalWhiteAddr": (
        _A,
        "update_global_white_addr",
        "Replace the global white addresses of brokers.",
    ),
    "clusterAclConfigVersion": (
        _A,
        "cluster_acl_config_version",
        "The ACL file versions of brokers.",
    ),
    "getAclConfig": (_A, "get_acl_config", "The ACL accounts and white addresses of brokers."),
    # replication (issue 13)
    "haStatus": (_H, "ha_status", "The replication status of brokers."),
    # the book's remaining commands (issue 20)
    "allocateMQ": (_T, "allocate_mq", "How a topic's queues are allocated to clients."),
    "updateOrderConf": (_T, "update_order_conf", "Put, get or delete a topic's order conf."),
    "printMsgByQueue": (_M, "print_msg_by_queue", "Print the messages of one queue."),
    "queryCq": (_Q, "query_cq", "Raw ConsumeQueue entries of one queue."),
    "checkMsgSendRT": (_P, "check_msg_send_rt", "Time sends to a topic, queue by queue."),
    "clusterRT": (_P, "cluster_rt", "Time sends to every broker of the clusters."),
    "sendMsgStatus": (_P, "send_msg_status", "Time sends to one broker."),
    # DLedger (issue 14)
    "transferLeadership": (
        _D,
        "transfer_leadership",
        "Hand a DLedger group's leadership to one of its nodes.",
    ),
}

_BY_LOWER = {name.lower(): name for name in COMMANDS}


class AdminGroup(click.Group):
    """The command group: lazy, case-insensitive, one-line errors."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS, key=str.lower)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        name = _BY_LOWER.get(cmd_name.lower())
        if name is None:
            return None
        module_name, attr, _ = COMMANDS[name]
        command = getattr(importlib.import_module(module_name), attr)
        if not isinstance(command, click.Command):
            raise TypeError(f"{module_name}:{attr} is not a click command")
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # summaries come from the table: listing the commands imports none of them
        rows = [(name, COMMANDS[name][2]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name = args[0] if args else ""
        if self.get_command(ctx, name) is None:
            raise OneLineUsageError(f"no such command {name!r}", ctx)
        return super().resolve_command(ctx, args)


@click.group(
    "admin",
    cls=AdminGroup,
    context_settings={"help_option_names": ["-h", "--help"]},
)
def admin() -> None:
    """RocketMQ's mqadmin: manage topics, groups, brokers, offsets and messages.

    Every command takes -n/--namesrvAddr (default: $NAMESRV_ADDR, then 127.0.0.1:9876),
    --json (machine-readable output) and -h/--help. Errors print one line on stderr and
    exit with status 1 (operation failed) or 2 (bad command line).
    """


def main() -> None:
    """The ``mqadmin`` console script."""
    admin(prog_name="mqadmin")
