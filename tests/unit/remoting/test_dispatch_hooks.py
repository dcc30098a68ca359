"""The dispatcher's hooks: every hook sees each request; only hooks that observe responses
(not ``observes_responses = False``, as the ACL hook declares) are called per response."""

from __future__ import annotations

from ariane.remoting.channel import Channel
from ariane.remoting.dispatch import Dispatcher, RequestContext
from ariane.remoting.protocol.command import RemotingCommand
from tests.unit.broker.harness import FakeChannel


class Recorder:
    def __init__(self, log: list[str], name: str) -> None:
        self.log, self.name = log, name

    def before_request(self, channel: Channel, request: RemotingCommand) -> None:
        self.log.append(f"{self.name} before {request.code}")

    def after_response(
        self, channel: Channel, request: RemotingCommand, response: RemotingCommand | None
    ) -> None:
        self.log.append(f"{self.name} after {request.code}")


class RequestsOnly(Recorder):
    observes_responses = False


def test_hooks_that_do_not_observe_responses_are_not_called_after() -> None:
    log: list[str] = []
    dispatcher = Dispatcher()
    dispatcher.register_hook(RequestsOnly(log, "acl"))
    dispatcher.register_hook(Recorder(log, "metrics"))

    def answer(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        return RemotingCommand.response(0)

    dispatcher.register_processor(310, answer)
    channel = FakeChannel()
    dispatcher.handle_request(channel, RemotingCommand.request(310))  # type: ignore[arg-type]
    assert log == ["acl before 310", "metrics before 310", "metrics after 310"]
    assert [r.code for r in channel.sent] == [0]
    assert len(dispatcher.hooks) == 2
