"""ACL page (rocketmq-dashboard's ``/acl/*``): the accounts of the brokers' ``plain_acl.yml``
with their permissions (secrets never shown), and creating, updating and deleting an account
on every master at once. Brokers without ACL say so instead of failing the page."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.routing import Route

from ariane.acl.plain import PlainAccessConfig
from ariane.dashboard.forms import BadInput, parse_bool
from ariane.dashboard.web import (
    Done,
    Page,
    PageError,
    action_routes,
    confirm_field,
    page_routes,
    text_field,
)
from ariane.errors import ArianeError

if TYPE_CHECKING:
    from ariane.dashboard.context import Dashboard

__all__ = ["routes"]

_PERMS = ("", "DENY", "PUB", "SUB", "PUB|SUB")


def _account_json(acc: PlainAccessConfig, broker: str) -> dict[str, Any]:
    out = acc.to_json()
    out.pop("secretKey", None)
    out["broker"] = broker
    return out


async def acl(request: Request, dash: Dashboard) -> Page:
    """ACL: every account of every master (secrets hidden) and the global white rules."""
    answers = await dash.admin.each_broker(
        dash.admin.acl_config, timeout_ms=dash.config.request_timeout_ms
    )
    accounts: dict[str, dict[str, Any]] = {}
    for addr, config in sorted(answers.values.items()):
        for acc in config.accounts:
            row = accounts.setdefault(acc.access_key, _account_json(acc, addr))
            if row["broker"] != addr:
                row["broker"] += f", {addr}"
    white = sorted({w for c in answers.values.values() for w in c.global_white_addrs})
    off = sorted(a for a, e in answers.errors.items() if "not enabled" in e)
    warnings = [f"broker {a}: {e}" for a, e in sorted(answers.errors.items()) if a not in off]
    rows = sorted(accounts.values(), key=lambda r: r["accessKey"])
    return Page(
        "acl.html",
        {
            "accounts": rows,
            "white": white,
            "off": off,
            "enabled": bool(answers.values),
            "perms": _PERMS,
        },
        {"accounts": rows, "globalWhiteAddrs": white, "aclDisabledOn": off},
        warnings,
    )


def _lines(form: FormData, name: str) -> tuple[str, ...]:
    text = text_field(form, name, required=False)
    items = tuple(p.strip() for p in text.replace(",", "\n").splitlines() if p.strip())
    for item in items:
        resource, sep, perm = item.partition("=")
        if not sep or not resource.strip() or perm.strip().upper() not in _PERMS[1:]:
            raise BadInput(name, f"{item!r} is not RESOURCE=PERM (PERM: DENY, PUB, SUB or PUB|SUB)")
    return items


def _perm(form: FormData, name: str) -> str | None:
    value = text_field(form, name, required=False).upper()
    if value not in _PERMS:
        raise BadInput(name, "must be DENY, PUB, SUB or PUB|SUB")
    return value or None


async def create_or_update(request: Request, form: FormData, dash: Dashboard) -> Done:
    """Create or update an account on every master."""
    access_key = text_field(form, "accessKey")
    secret_key = text_field(form, "secretKey")
    if len(access_key) < 6 or len(secret_key) < 6:
        raise BadInput("accessKey", "the access key and the secret key need at least 6 characters")
    account = PlainAccessConfig(
        access_key=access_key,
        secret_key=secret_key,
        white_remote_address=text_field(form, "whiteRemoteAddress", required=False) or None,
        admin=parse_bool(text_field(form, "admin", required=False)),
        default_topic_perm=_perm(form, "defaultTopicPerm"),
        default_group_perm=_perm(form, "defaultGroupPerm"),
        topic_perms=_lines(form, "topicPerms"),
        group_perms=_lines(form, "groupPerms"),
    )
    answers = await dash.admin.each_broker(
        lambda a: dash.admin.update_acl_account(a, account),
        timeout_ms=dash.config.request_timeout_ms,
    )
    if answers.errors:
        failed = "; ".join(f"{a}: {e}" for a, e in sorted(answers.errors.items()))
        raise PageError(502, f"account {access_key} not saved on every broker: {failed}")
    addrs = sorted(answers.values)
    return Done(f"account {access_key} saved on {len(addrs)} broker(s)", "/acl", {"brokers": addrs})


async def delete(request: Request, form: FormData, dash: Dashboard) -> Done:
    """Delete an account from every master (the name typed again to confirm)."""
    access_key = text_field(form, "accessKey")
    confirm_field(form, access_key)
    addrs = await dash.admin.master_addrs()
    failed: list[str] = []
    for addr in addrs:
        try:
            await dash.admin.delete_acl_account(addr, access_key)
        except ArianeError as exc:
            failed.append(f"{addr}: {exc}")
    if failed and len(failed) == len(addrs):
        raise BadInput("accessKey", "; ".join(failed))
    return Done(f"account {access_key} deleted", "/acl", {"failed": failed})


def routes() -> list[Route]:
    """This module's routes."""
    return [
        *page_routes("/acl", acl, name="ACL"),
        *action_routes("/acl/createOrUpdate", create_or_update, default_next="/acl"),
        *action_routes("/acl/delete", delete, default_next="/acl"),
    ]
