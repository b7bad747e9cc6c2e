"""The UI's routes: ``/`` and ``/ui/...``, clear of the LangSmith REST paths.

No ``from __future__ import annotations`` here: FastAPI must see the real annotations of the
endpoints, which name a type alias local to ``create_ui_router``.
"""

from collections.abc import Callable
from typing import Annotated, Any
from urllib.parse import quote, urlencode

from fastapi import APIRouter, Depends, Form, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.routing import APIRoute
from starlette.concurrency import run_in_threadpool

from ..analysis import CompareOptions
from ..errors import AssayError, AuthError, InvalidInputError, NotFoundError, require
from ..store import Store
from . import _views, _views_experiment, _views_projects, _views_threads
from ._auth import COOKIE_NAME, LoginRedirect, StoreFromKey, _key, safe_next
from ._format import FILTERS
from ._views_projects import number_field

__all__ = ["create_ui_router"]


def _environment() -> Any:
    jinja2 = require("jinja2", "server", "the web UI")
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("assay.ui", "templates"),
        autoescape=jinja2.select_autoescape(["html"]),
        trim_blocks=True, lstrip_blocks=True,
    )
    env.filters.update(FILTERS)
    env.globals["stat_cards"] = _views.stat_cards
    env.globals["project_cards"] = _views_projects.project_cards
    env.globals["event_offset"] = _views_projects.event_offset
    env.globals["chat_of"] = _views_projects.chat_of
    return env




def _bad_fields(exc: RequestValidationError) -> str:
    """A page's bad query or form values, named: ``threshold: Input should be ... (got 'x')``."""
    parts = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err.get("loc", ())[1:]) or "request"
        got = f" (got {err['input']!r})" if isinstance(err.get("input"), str) else ""
        parts.append(f"{where}: {err.get('msg', 'invalid')}{got}")
    return "bad value: " + "; ".join(parts)


def _html_errors(page: Callable[[Request, str, int], Response]) -> type[APIRoute]:
    """A route class whose bad query and form values answer the HTML error page (FastAPI's
    own answer is JSON, which a person following a link should not get)."""
    class HtmlErrorRoute(APIRoute):
        def get_route_handler(self) -> Callable[[Request], Any]:
            handler = super().get_route_handler()

            async def guarded(request: Request) -> Response:
                try:
                    return await handler(request)
                except RequestValidationError as exc:
                    return page(request, _bad_fields(exc), 400)
            return guarded
    return HtmlErrorRoute


def _status(exc: AssayError) -> int:
    if isinstance(exc, NotFoundError):
        return 404
    if isinstance(exc, InvalidInputError):
        return 400
    return 401 if isinstance(exc, AuthError) else 500


def create_ui_router(
    get_store: Callable[..., Store | LoginRedirect],
    *,
    check_key: Callable[[str], object] | None = None,
) -> APIRouter:
    """The web UI as a router; ``get_store`` is a FastAPI dependency giving the request's Store,
    or a ``LoginRedirect`` when the page needs a key first (answered with a 303 to the form).

    ``check_key`` validates a key typed into the login form (raising AuthError); by default the
    ``check_key`` of a ``StoreFromKey`` dependency, else the form accepts any key and the next
    page checks it.
    """
    env = _environment()
    check = check_key or getattr(get_store, "check_key", None)
    auth = getattr(get_store, "auth", check is not None)
    StoreDep = Annotated[Any, Depends(get_store)]  # a Store, or a LoginRedirect

    def render(request: Request | None, name: str, context: dict[str, Any],
               status: int = 200) -> HTMLResponse:
        ctx = {"request": request, "auth": auth, "path": request.url.path if request else "/",
               "logged_in": bool(request and request.cookies.get(COOKIE_NAME)), **context}
        return HTMLResponse(env.get_template(name).render(ctx), status_code=status)

    def error_page(request: Request | None, message: str, status: int) -> HTMLResponse:
        return render(request, "error.html", {"message": message, "status": status}, status)

    router = APIRouter(include_in_schema=False, route_class=_html_errors(error_page))

    def show(request: Request, store: Store | LoginRedirect, name: str,
             build: Callable[[Store], dict[str, Any]]) -> HTMLResponse | RedirectResponse:
        """Render a page; assay's own errors become an HTML page with the right status (a page
        that names a bad filter in place sets ``status`` in its context)."""
        if isinstance(store, LoginRedirect):
            return RedirectResponse(store.location, status_code=303)
        try:
            context = build(store)
        except AssayError as exc:
            return error_page(request, str(exc), _status(exc))
        return render(request, name, context, context.get("status", 200))

    @router.get("/", response_class=HTMLResponse)
    def datasets(request: Request, store: StoreDep) -> Any:
        return show(request, store, "datasets.html", _views.home)

    @router.get("/ui/datasets/{dataset_id}", response_class=HTMLResponse)
    def dataset(request: Request, store: StoreDep, dataset_id: str,
                split: str | None = None, as_of: str | None = None,
                offset: int = 0) -> Any:
        return show(request, store, "dataset.html", lambda s: _views.dataset_page(
            s, dataset_id, split=split or None, as_of=as_of or None, offset=offset))

    @router.get("/ui/datasets/{dataset_id}/experiments", response_class=HTMLResponse)
    def experiments(request: Request, store: StoreDep, dataset_id: str) -> Any:
        return show(request, store, "experiments.html",
                    lambda s: _views.experiments_page(s, dataset_id))

    @router.get("/ui/experiments/{project_id}", response_class=HTMLResponse)
    def experiment(request: Request, store: StoreDep, project_id: str,
                   failing: str | None = None, errors: bool = False,
                   threshold: float = 0.5, cursor: str | None = None,
                   where: str | None = None) -> Any:
        return show(request, store, "experiment.html", lambda s: _views_experiment.experiment_page(
            s, project_id, failing=failing, errors=errors, threshold=threshold, cursor=cursor,
            where=where))

    @router.get("/ui/runs/{run_id}", response_class=HTMLResponse)
    def run(request: Request, store: StoreDep, run_id: str) -> Any:
        return show(request, store, "run.html", lambda s: _views.run_page(s, run_id))

    def public_page(request: Request, what: str, template: str,
                    build: Callable[[Store], dict[str, Any]]) -> Any:
        """A page a share token opens without a key, built on the base store (the token says
        whose it is)."""
        base = getattr(get_store, "store", None)
        if base is None:
            return error_page(request, f"no shared {what} here", 404)
        return show(request, base, template, build)

    @router.get("/public/{share_token}/r", response_class=HTMLResponse)
    def shared_trace(request: Request, share_token: str) -> Any:
        """A shared trace (``share_run``'s link): the token opens this trace only."""
        def build(base: Store) -> dict[str, Any]:
            view, root = base.shares.shared_run(share_token)
            return _views.run_page(view, str(root.id), shared=True)
        return public_page(request, "traces", "run.html", build)

    @router.get("/public/{share_token}/d", response_class=HTMLResponse)
    def shared_dataset(request: Request, share_token: str, split: str = "", as_of: str = "",
                       offset: int = 0) -> Any:
        """A shared dataset (``share_dataset``'s link): its examples and experiments."""
        def build(base: Store) -> dict[str, Any]:
            view, ds = base.shares.shared_dataset(share_token)
            return _views.dataset_page(view, str(ds.id), split=split or None,
                                       as_of=as_of or None, offset=offset, shared=True)
        return public_page(request, "datasets", "dataset.html", build)

    def toggle_share(request: Request, store: Store | LoginRedirect, kind: str, item: str,
                     stop: str) -> Any:
        """Share a dataset or a run's trace (a link that opens it without a key), or stop
        sharing it; back to its page."""
        def work(s: Store) -> str:
            if kind == "datasets":
                (s.shares.unshare_dataset if stop else s.shares.share_dataset)(item)
            else:
                (s.shares.unshare_run if stop else s.shares.share_run)(item)
            return f"/ui/{kind}/{item}"
        return act(request, store, work)

    @router.post("/ui/datasets/{dataset_id}/share", response_model=None)
    def share_dataset(request: Request, store: StoreDep, dataset_id: str,
                      stop: Annotated[str, Form()] = "") -> Any:
        return toggle_share(request, store, "datasets", dataset_id, stop)

    @router.post("/ui/runs/{run_id}/share", response_model=None)
    def share(request: Request, store: StoreDep, run_id: str,
              stop: Annotated[str, Form()] = "") -> Any:
        return toggle_share(request, store, "runs", run_id, stop)

    @router.get("/ui/compare", response_class=HTMLResponse)
    def compare(request: Request, store: StoreDep, ids: Annotated[list[str], Query()] = [],  # noqa: B006
                confidence: float = 0.95, resamples: int = 2000,
                seed: int = 0, offset: int = 0, order: str | None = None,
                baseline: str | None = None) -> Any:
        def build(s: Store) -> dict[str, Any]:
            try:
                opts = CompareOptions(confidence=confidence, resamples=min(resamples, 20_000),
                                      seed=seed)
            except ValueError as exc:
                raise InvalidInputError(f"bad comparison option: {exc}") from None
            chosen = _views.order_ids(s, _views.parse_ids(ids), by_time=order == "time",
                                      baseline=baseline)
            return _views.compare_page(s, chosen, opts, offset)

        return show(request, store, "compare.html", build)

    # the links the official SDKs print, for a client given ``web_url=`` of this server
    @router.get("/o/{tenant}/datasets/{dataset_id}/compare")
    def sdk_compare(dataset_id: str, sessions: Annotated[str, Query(
            alias="selectedSessions")] = "") -> RedirectResponse:
        ids = [i for i in sessions.split(",") if i]
        if len(ids) == 1:  # an experiment (what evaluate() prints)
            return RedirectResponse(f"/ui/experiments/{quote(ids[0])}", status_code=303)
        if not ids:
            return RedirectResponse(f"/ui/datasets/{quote(dataset_id)}/experiments",
                                    status_code=303)
        return RedirectResponse("/ui/compare?" + urlencode({"ids": ",".join(ids)}),
                                status_code=303)

    @router.get("/o/{tenant}/projects/p/{project_id}")
    def sdk_project(project_id: str) -> RedirectResponse:
        return RedirectResponse(f"/ui/projects/{quote(project_id)}", status_code=303)

    @router.get("/o/{tenant}/projects/p/{project_id}/r/{run_id}")
    def sdk_run(run_id: str) -> RedirectResponse:  # get_run_url's link, a run's app_path
        return RedirectResponse(f"/ui/runs/{quote(run_id)}", status_code=303)

    @router.get("/ui/projects", response_class=HTMLResponse)
    def projects(request: Request, store: StoreDep) -> Any:
        return show(request, store, "projects.html", _views_projects.projects_page)

    @router.get("/ui/projects/{project_id}/threads", response_class=HTMLResponse)
    def threads(request: Request, store: StoreDep, project_id: str, offset: int = 0,
                where: str | None = None) -> Any:
        return show(request, store, "threads.html", lambda s: _views_threads.threads_page(
            s, project_id, offset=offset, where=where))

    @router.get("/ui/projects/{project_id}/threads/{thread_id:path}",
                response_class=HTMLResponse)
    def thread(request: Request, store: StoreDep, project_id: str, thread_id: str) -> Any:
        return show(request, store, "thread.html", lambda s: _views_threads.thread_page(
            s, project_id, thread_id))

    @router.get("/ui/projects/{project_id}", response_class=HTMLResponse)
    def project(request: Request, store: StoreDep, project_id: str, where: str | None = None,
                run_type: str | None = None, errors: bool = False, window: str = "all",
                feedback_key: str | None = None, score_min: str | None = None,
                score_max: str | None = None, q: str | None = None,
                cursor: str | None = None) -> Any:
        return show(request, store, "project.html", lambda s: _views_projects.project_page(
            s, project_id, where=where, run_type=run_type, errors=errors, window=window,
            feedback_key=(feedback_key or "").strip() or None,
            score_min=number_field(score_min or "", "score_min"),
            score_max=number_field(score_max or "", "score_max"), q=q, cursor=cursor))

    def who(request: Request, store: Store) -> str:
        """The name feedback given in the UI is signed with: the API key's description (or
        its prefix), ``local`` on a server without keys."""
        key = _key(request)
        if not auth or not key:
            return "local"
        for k in store.keys.list():
            if key.startswith(k.prefix) and k.tenant_id == str(store.tenant_id):
                return k.description or k.prefix
        return key[:10]

    def act(request: Request, store: Any, work: Callable[[Store], str]) -> Any:
        """A form's action: do it, then go back to the page it names (303), or an error page."""
        if isinstance(store, LoginRedirect):
            return RedirectResponse(store.location, status_code=303)
        try:
            return RedirectResponse(safe_next(work(store)), status_code=303)
        except AssayError as exc:
            return error_page(request, str(exc), _status(exc))

    @router.post("/ui/runs/{run_id}/feedback", response_model=None)
    def add_feedback(request: Request, store: StoreDep, run_id: str,
                     key: Annotated[str, Form()] = "", score: Annotated[str, Form()] = "",
                     value: Annotated[str, Form()] = "", comment: Annotated[str, Form()] = "",
                     next: Annotated[str, Form()] = "") -> Any:
        def work(s: Store) -> str:
            _views_projects.add_feedback(s, run_id, key=key, score=number_field(score, "score"),
                                         value=value, comment=comment, user=who(request, s))
            return next or f"/ui/runs/{run_id}"
        return act(request, store, work)

    @router.post("/ui/feedback/{feedback_id}", response_model=None)
    def correct_feedback(request: Request, store: StoreDep, feedback_id: str,
                         score: Annotated[str, Form()] = "", value: Annotated[str, Form()] = "",
                         comment: Annotated[str, Form()] = "",
                         next: Annotated[str, Form()] = "/") -> Any:
        def work(s: Store) -> str:
            _views_projects.correct_feedback(s, feedback_id, score=number_field(score, "score"),
                                             value=value, comment=comment, user=who(request, s))
            return next
        return act(request, store, work)

    @router.get("/ui/queues", response_class=HTMLResponse)
    def queues(request: Request, store: StoreDep) -> Any:
        return show(request, store, "queues.html", _views_projects.queues_page)

    @router.get("/ui/queues/{queue_id}", response_class=HTMLResponse)
    def queue(request: Request, store: StoreDep, queue_id: str) -> Any:
        return show(request, store, "queue.html",
                    lambda s: _views_projects.queue_page(s, queue_id))

    @router.post("/ui/queues/{queue_id}/runs/{run_id}", response_model=None)
    async def review(request: Request, store: StoreDep, queue_id: str, run_id: str) -> Any:
        form = await request.form()
        fields = {k: str(v) for k, v in form.items()}

        def work(s: Store) -> str:
            _views_projects.review(s, queue_id, run_id, fields, user=who(request, s))
            return f"/ui/queues/{queue_id}"
        return await run_in_threadpool(act, request, store, work)

    @router.get("/ui/login", response_class=HTMLResponse)
    def login_form(request: Request, next: str = "/", error: str | None = None) -> HTMLResponse:
        return render(request, "login.html", {"next": safe_next(next), "error": error},
                      401 if error else 200)

    @router.post("/ui/login", response_model=None)
    def login(request: Request, api_key: Annotated[str, Form()] = "",
              next: Annotated[str, Form()] = "/") -> HTMLResponse | RedirectResponse:
        key = api_key.strip()
        if check is not None:
            try:
                check(key)
            except AuthError as exc:
                return render(request, "login.html",
                              {"next": safe_next(next), "error": str(exc)}, 401)
        elif not key:
            return render(request, "login.html",
                          {"next": safe_next(next), "error": "enter an API key"}, 401)
        response = RedirectResponse(safe_next(next), status_code=303)
        response.set_cookie(COOKIE_NAME, key, httponly=True, samesite="lax", path="/",
                            secure=request.url.scheme == "https", max_age=30 * 24 * 3600)
        return response

    @router.post("/ui/logout")
    def logout() -> RedirectResponse:
        response = RedirectResponse("/ui/login", status_code=303)
        response.delete_cookie(COOKIE_NAME, path="/")
        return response

    # the lists live on the home page; any other /ui/ address is a page that does not exist
    @router.get("/ui")
    @router.get("/ui/datasets")
    @router.get("/ui/experiments")
    def home_lists() -> RedirectResponse:
        return RedirectResponse("/", status_code=303)

    @router.get("/ui/{rest:path}", response_class=HTMLResponse)
    def no_such_page(request: Request, rest: str) -> HTMLResponse:
        return error_page(request, f"no page at /ui/{rest}", 404)

    return router


def ui_router_for(store: Store, *, auth: bool = True) -> APIRouter:
    """The UI over ``store``: keys checked against it (or its default workspace, auth=False)."""
    return create_ui_router(StoreFromKey(store, auth=auth))
