"""The plumbing every page shares: how a page handler's result becomes HTML or JSON, how a
POST is checked (login, admin, CSRF, origin) and how errors become one readable line.

How it works: a page handler is ``async (request, dash) -> Page``; ``page_routes`` serves it
twice, as HTML at ``/x`` (its Jinja2 template) and as JSON at ``/api/x`` (``Page.api``). An
action handler is ``async (request, form, dash) -> Done``; ``action_routes`` accepts it as a
POST at ``/x`` (a form: answered with a redirect back and a one-shot flash message) and at
``/api/x`` (answered with JSON). Errors never show a stack trace: bad input is a 400, an
unknown topic/group/message a 404, a broker's refusal or silence a 502, each with the
message; anything unexpected is logged and answered "internal error" (500).
"""

from __future__ import annotations

import json
import logging
import urllib.parse
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from ariane.client.errors import (
    ConsumerNotOnlineError,
    QueryNotFoundError,
    SubscriptionGroupNotExistError,
    TopicNotExistError,
)
from ariane.dashboard.forms import BadInput
from ariane.dashboard.security import (
    CSRF_COOKIE,
    CSRF_FIELD,
    CSRF_HEADER,
    SESSION_COOKIE,
    SESSION_MAX_AGE_S,
    User,
    csrf_ok,
    new_token,
)
from ariane.errors import ArianeError, InvalidArgumentError, RequestTimeoutError

if TYPE_CHECKING:
    from ariane.dashboard.context import Dashboard

__all__ = ["Done", "Page", "PageError", "action_routes", "page_routes", "safe_next"]

logger = logging.getLogger(__name__)
_FLASH_COOKIE = "ariane_flash"
_SECURITY_HEADERS = {
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "frame-ancestors 'none'; form-action 'self'; base-uri 'none'"
    ),
    "Cache-Control": "no-store",
}


class PageError(ArianeError):
    """A page cannot be shown as asked (status and message for the user)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(slots=True)
class Page:
    """What a page handler returns.

    Attributes:
        template: the Jinja2 template of the HTML form.
        context: what the template needs (rows as objects, forms...).
        api: the JSON answer of ``/api/...`` (plain JSON values).
        warnings: lines shown above the content (brokers that did not answer...).
        download: a file name: the HTML route answers ``api`` as a JSON download instead.
    """

    template: str
    context: dict[str, Any]
    api: dict[str, Any]
    warnings: list[str] = field(default_factory=list)
    download: str | None = None


@dataclass(slots=True)
class Done:
    """What an action handler returns: a message, where the browser goes next and the JSON
    answer."""

    message: str
    next_url: str
    api: dict[str, Any] = field(default_factory=dict)


PageHandler = Callable[[Request, "Dashboard"], Awaitable[Page]]
ActionHandler = Callable[[Request, FormData, "Dashboard"], Awaitable[Done]]


def safe_next(url: str | None, default: str) -> str:
    """``url`` if it is a path on this site, else ``default`` (no open redirects)."""
    if url and url.startswith("/") and not url.startswith("//") and "\\" not in url:
        return url
    return default


def _status_and_message(exc: BaseException) -> tuple[int, str]:
    if isinstance(exc, PageError):
        return exc.status, str(exc)
    if isinstance(exc, BadInput | InvalidArgumentError):
        return 400, str(exc)
    if isinstance(exc, TopicNotExistError):
        return 404, f"unknown topic: {exc.remark or exc}"
    if isinstance(exc, SubscriptionGroupNotExistError):
        return 404, f"unknown consumer group: {exc.remark or exc}"
    if isinstance(exc, QueryNotFoundError):
        return 404, f"not found: {exc.remark or exc}"
    if isinstance(exc, ConsumerNotOnlineError):
        return 409, f"no consumer of that group is online ({exc.remark or exc})"
    if isinstance(exc, RequestTimeoutError | TimeoutError):
        return 504, f"the cluster did not answer in time ({exc})"
    if isinstance(exc, ArianeError | OSError):
        return 502, f"the cluster refused or could not be reached: {exc}"
    logger.exception("dashboard page failed")
    return 500, "internal error; the dashboard's log has the details"


class _Ctx:
    """Per-request state: the CSRF token and the logged-in user."""

    def __init__(self, request: Request, dash: Dashboard) -> None:
        self.request = request
        self.dash = dash
        cookie = request.cookies.get(CSRF_COOKIE)
        self.new_csrf = not cookie
        self.csrf = cookie or new_token()
        self.user: User | None = None
        if dash.users is not None:
            name = dash.signer.loads(request.cookies.get(SESSION_COOKIE))
            self.user = dash.users.get(name) if name else None
        self.flash = request.cookies.get(_FLASH_COOKIE)

    @property
    def login_required(self) -> bool:
        return self.dash.users is not None and self.user is None

    @property
    def may_change(self) -> bool:
        return self.dash.users is None or (self.user is not None and self.user.admin)

    def finish(self, response: Response) -> Response:
        for key, value in _SECURITY_HEADERS.items():
            response.headers.setdefault(key, value)
        if self.new_csrf:
            response.set_cookie(
                CSRF_COOKIE, self.csrf, httponly=True, samesite="strict", path="/",
                max_age=SESSION_MAX_AGE_S,
            )  # fmt: skip
        if self.flash is not None:
            response.delete_cookie(_FLASH_COOKIE, path="/")
        return response


def _flash_message(ctx: _Ctx) -> tuple[str, str] | None:
    if not ctx.flash:
        return None
    kind, _, text = urllib.parse.unquote(ctx.flash).partition(":")
    return (kind if kind in ("ok", "error") else "ok", text)


def render(ctx: _Ctx, template: str, status: int = 200, **context: Any) -> HTMLResponse:
    """Render ``template`` with the shared context (navigation, user, CSRF token, flash)."""
    dash = ctx.dash
    html = dash.env.get_template(template).render(
        csrf_token=ctx.csrf,
        user=ctx.user,
        auth=dash.users is not None,
        may_change=ctx.may_change,
        flash=_flash_message(ctx),
        nav=dash.nav(),
        path=ctx.request.url.path,
        query=ctx.request.query_params,
        namesrv=dash.config.namesrv_addr,
        **context,
    )
    return HTMLResponse(html, status_code=status)


def _json(data: Any, status: int = 200) -> JSONResponse:
    return JSONResponse(json.loads(json.dumps(data, default=str)), status_code=status)


def page_routes(path: str, handler: PageHandler, *, name: str) -> list[Route]:
    """``GET path`` (HTML) and ``GET /api<path>`` (JSON) for one page."""

    async def serve(request: Request, *, api: bool) -> Response:
        dash: Dashboard = request.app.state.dash
        ctx = _Ctx(request, dash)
        if ctx.login_required:
            if api:
                return ctx.finish(_json({"error": "login required"}, 401))
            target = "/login?next=" + urllib.parse.quote(request.url.path + _qs(request))
            return ctx.finish(RedirectResponse(target, status_code=303))
        try:
            result = await handler(request, dash)
            if result.download is not None and not api:
                response: Response = _json(result.api)
                response.headers["Content-Disposition"] = (
                    f'attachment; filename="{result.download}"'
                )
            elif api:
                body = dict(result.api)
                if result.warnings:
                    body["warnings"] = result.warnings
                response = _json(body)
            else:
                response = render(
                    ctx, result.template, title=name, warnings=result.warnings, **result.context
                )
        except Exception as exc:  # every failure becomes one readable line
            status, message = _status_and_message(exc)
            if api:
                return ctx.finish(_json({"error": message}, status))
            return ctx.finish(render(ctx, "error.html", status, title=name, error=message))
        return ctx.finish(response)

    async def html(request: Request) -> Response:
        return await serve(request, api=False)

    async def api(request: Request) -> Response:
        return await serve(request, api=True)

    api_path = "/api" + (path if path != "/" else "/dashboard")
    return [Route(path, html, methods=["GET"]), Route(api_path, api, methods=["GET"])]


def _qs(request: Request) -> str:
    return f"?{request.url.query}" if request.url.query else ""


def _origin_ok(request: Request) -> bool:
    origin = request.headers.get("origin")
    if not origin or origin == "null":
        return origin is None
    host = request.headers.get("host", "")
    return urllib.parse.urlsplit(origin).netloc == host


def action_routes(path: str, handler: ActionHandler, *, default_next: str) -> list[Route]:
    """``POST path`` (a form; redirects back) and ``POST /api<path>`` (JSON) for one
    state-changing action, with login, admin, origin and CSRF checks."""

    async def serve(request: Request, *, api: bool) -> Response:
        dash: Dashboard = request.app.state.dash
        ctx = _Ctx(request, dash)
        form = await request.form()
        back = safe_next(_field(form, "next"), default_next)

        def refuse(status: int, message: str) -> Response:
            if api:
                return ctx.finish(_json({"error": message}, status))
            return ctx.finish(render(ctx, "error.html", status, title="Refused", error=message))

        if ctx.login_required:
            return refuse(401, "login required")
        token = _field(form, CSRF_FIELD) or request.headers.get(CSRF_HEADER)
        if not _origin_ok(request) or not csrf_ok(request.cookies.get(CSRF_COOKIE), token):
            return refuse(403, "the form is stale or was not sent by this dashboard; reload it")
        if not ctx.may_change:
            return refuse(403, "this account may only look; ask an admin to change things")
        try:
            done = await handler(request, form, dash)
        except Exception as exc:  # every failure becomes one readable line
            status, message = _status_and_message(exc)
            if api:
                return ctx.finish(_json({"error": message}, status))
            return _redirect_with_flash(ctx, back, "error", message)
        if api:
            return ctx.finish(_json({"ok": True, "message": done.message, **done.api}))
        return _redirect_with_flash(ctx, safe_next(done.next_url, back), "ok", done.message)

    async def html(request: Request) -> Response:
        return await serve(request, api=False)

    async def api(request: Request) -> Response:
        return await serve(request, api=True)

    return [Route(path, html, methods=["POST"]), Route("/api" + path, api, methods=["POST"])]


def _redirect_with_flash(ctx: _Ctx, url: str, kind: str, message: str) -> Response:
    response = RedirectResponse(url, status_code=303)
    ctx.flash = None
    response.set_cookie(
        _FLASH_COOKIE, urllib.parse.quote(f"{kind}:{message[:600]}"), httponly=True,
        samesite="strict", path="/",
    )  # fmt: skip
    return ctx.finish(response)


def _field(form: FormData, name: str) -> str | None:
    value = form.get(name)
    return value if isinstance(value, str) else None


def text_field(form: FormData, name: str, *, required: bool = True, default: str = "") -> str:
    """A text field of a form, stripped; ``BadInput`` when required and empty."""
    value = (_field(form, name) or "").strip()
    if required and not value:
        raise BadInput(name, "is required")
    return value or default


def confirm_field(form: FormData, expected: str) -> None:
    """Deletes need the name typed again in ``confirm``."""
    if text_field(form, "confirm", required=False) != expected:
        raise BadInput("confirm", f"type {expected!r} to confirm the deletion")


def login_routes() -> list[Route]:
    """``GET/POST /login`` and ``POST /logout``."""

    async def login_page(request: Request) -> Response:
        dash: Dashboard = request.app.state.dash
        ctx = _Ctx(request, dash)
        nxt = safe_next(request.query_params.get("next"), "/")
        return ctx.finish(render(ctx, "login.html", title="Login", next=nxt, error=None))

    async def login(request: Request) -> Response:
        dash: Dashboard = request.app.state.dash
        ctx = _Ctx(request, dash)
        form = await request.form()
        nxt = safe_next(_field(form, "next"), "/")
        if not csrf_ok(request.cookies.get(CSRF_COOKIE), _field(form, CSRF_FIELD)):
            error = "the form is stale; try again"
        elif dash.users is None:
            return ctx.finish(RedirectResponse(nxt, status_code=303))
        else:
            user = dash.users.check(_field(form, "username") or "", _field(form, "password") or "")
            if user is not None:
                response = RedirectResponse(nxt, status_code=303)
                response.set_cookie(
                    SESSION_COOKIE, dash.signer.dumps(user.name), httponly=True,
                    samesite="strict", path="/", max_age=SESSION_MAX_AGE_S,
                )  # fmt: skip
                return ctx.finish(response)
            error = "wrong user name or password"
        return ctx.finish(render(ctx, "login.html", 401, title="Login", next=nxt, error=error))

    async def logout(request: Request) -> Response:
        dash: Dashboard = request.app.state.dash
        ctx = _Ctx(request, dash)
        form = await request.form()
        if not csrf_ok(request.cookies.get(CSRF_COOKIE), _field(form, CSRF_FIELD)):
            return ctx.finish(render(ctx, "error.html", 403, title="Refused", error="stale form"))
        response = RedirectResponse("/login", status_code=303)
        response.delete_cookie(SESSION_COOKIE, path="/")
        return ctx.finish(response)

    return [
        Route("/login", login_page, methods=["GET"]),
        Route("/login", login, methods=["POST"]),
        Route("/logout", logout, methods=["POST"]),
    ]
