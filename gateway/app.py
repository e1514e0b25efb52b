"""The Starlette application: routes, error handlers, and the services behind them."""

from __future__ import annotations

import contextlib
import gc
import logging
from typing import Any, AsyncIterator

import anyio
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from connectors.browser import make_backends
from connectors.servers import MCPServers
from runtime import isolation
from runtime.supervision import Supervisor
from sandbox.docker_backend import Owner
from sandbox.local_backend import memory_bytes
from sandbox.manager import SandboxManager, SandboxUnavailable

from .agents.automation_routes import routes as automation_routes
from .agents.environment_routes import routes as environment_routes
from .agents.feed import SessionFeed
from .agents.routes import routes as agent_routes
from .agents.scheduler import Scheduler
from .agents.traces import TurnSpans
from .agents.turns import Turns
from .chat.routes import routes as chat_routes
from .config import GatewayConfig
from .conversations.routes import routes as conversation_routes
from .core.admission import Admission
from .core.runs import Runs
from .core.sealed import KeysDoNotOpen, shared_sealer
from .core.tenant_sockets import TenantSockets
from .engine import harmony
from .engine.completion import ModelInfo
from .engine.renderer import PromptRenderer
from .engine.routing import Engines
from .errors import APIError, error_response, handle_api_error, handle_storage_error, handle_unexpected, handle_unstorable_value, speaks_anthropic
from .files.blobs import Blobs
from .files.containers import routes as container_routes
from .files.routes import routes as file_routes
from .files.service import FileService
from .jsontext import JSONResponse
from .messages.routes import anthropic_model, anthropic_models, served_model
from .messages.routes import routes as message_routes
from .metrics import Metrics
from .replicas import Replicas
from .responses.loop.run import ResponseRun
from .responses.routes import routes as response_routes
from .sandbox_sessions import SessionDirectory
from .services import Services, serve_every_package
from .shutdown import Drain
from .skills.routes import routes as skill_routes
from .skills.service import SkillService
from .storage import Database, StorageError, UnstorableValue, open_database
from .storage.agent_store import AgentStore
from .storage.automation_store import AutomationStore
from .storage.chunk_index import VectorsUnavailable
from .storage.conversation_store import ConversationStore
from .storage.database import Dialect
from .storage.environment_store import EnvironmentStore
from .storage.file_store import FileStore
from .storage.key_store import KeyStore
from .storage.response_store import ResponseStore, expire_responses
from .storage.skill_store import SkillStore
from .storage.vault_store import VaultStore
from .storage.webhook_outbox import WebhookOutbox
from .storage.webhook_store import WebhookStore
from .tracing import Tracing
from .vaults.routes import routes as vault_routes
from .vaults.tokens import TokenRefresher
from .vector_stores.routes import routes as vector_store_routes
from .vector_stores.setup import open_vector_stores
from .web.middleware import GatewayMiddleware
from .webhooks.deliverer import Deliverer
from .webhooks.outbox import ResponseEvents
from .webhooks.routes import routes as webhook_routes
from .webhooks.sender import Sender

log = logging.getLogger("gateway")


async def health(request: Request) -> Response:
    """Liveness: the process serves."""
    return JSONResponse({"status": "ok"})


async def ready(request: Request) -> Response:
    """Readiness: every model has an engine that answers (as the last health check found), every
    configured tool server is connected, the sandboxes' egress proxy answers where they have a network,
    and none of the app's own tasks was left stopped."""
    services: Services = request.app.state.services
    engines = services.engines.health()
    engine = all(model.answers for model in services.engines.models)
    servers = services.mcp.health()
    draining = services.drain.draining
    stopped = services.supervisor.stopped()  # a task of the app's that kept failing: only a restart helps
    egress = services.sandbox.egress_healthy if services.sandbox is not None else None
    ok = engine and all(servers.values()) and not draining and not stopped and egress is not False
    body: dict[str, Any] = {
        "status": "ready" if ok else "not_ready", "engine": engine, "engines": engines, "tool_servers": servers, "draining": draining,
        "tasks": services.supervisor.health(),
    }  # fmt: skip
    if services.sandbox is not None:
        body["sandbox_sessions"] = services.sandbox.live_sessions
    if egress is not None:
        body["sandbox_egress"] = egress
    body["mcp_request_sessions"] = services.mcp.request_sessions
    return JSONResponse(body, status_code=200 if ok else 503)


async def metrics(request: Request) -> Response:
    services: Services = request.app.state.services
    return Response(services.metrics.exposition(), media_type=CONTENT_TYPE_LATEST)


def _model_object(model: ModelInfo) -> dict[str, Any]:
    described = {"id": model.id, "object": "model", "created": model.created, "owned_by": model.owned_by}
    return described | ({"max_model_len": model.max_model_len} if model.max_model_len else {})


async def list_models(request: Request) -> Response:
    """Every configured model, as its engine describes it (an engine down: as configured)."""
    services: Services = request.app.state.services
    listed = [model for model, _ in await services.engines.listed()]
    if speaks_anthropic(request.scope):
        return JSONResponse(anthropic_models(listed))
    return JSONResponse({"object": "list", "data": [_model_object(model) for model in listed]})


async def retrieve_model(request: Request) -> Response:
    """A model by any name a request may give it (its served name or an alias)."""
    services: Services = request.app.state.services
    name = request.path_params["model"]
    anthropic = speaks_anthropic(request.scope)
    wanted = services.engines.route(served_model(services.engines, name) if anthropic else name)
    for model, engine in await services.engines.listed():
        if engine is wanted:
            return JSONResponse(anthropic_model(model, name) if anthropic else _model_object(model))
    raise APIError(404, f"The model '{request.path_params['model']}' does not exist.", param="model", code="model_not_found")


async def handle_http_exception(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    kind = "not_found" if exc.status_code == 404 else "invalid_request"
    message = f"{request.method} {request.url.path} is not a route of this gateway." if exc.status_code in (404, 405) else exc.detail
    return error_response(request.scope, APIError(exc.status_code, message, code=kind))


async def _start_sandbox(config: GatewayConfig, tasks: Supervisor, replicas: Replicas, database: Database) -> SandboxManager | None:
    if config.sandbox is None:
        return None
    # Containers carry this replica's id; at start-up and from time to time, those of replicas whose lease
    # ran out are removed, never those of a live replica sharing the Docker daemon. The sessions'
    # directory lets a conversation's python session follow it to whichever replica serves it.
    owner = Owner(replicas.id, replicas.live, sweep_s=replicas.lease_s)
    sandbox = SandboxManager(config.sandbox, owner, SessionDirectory(database, replicas))
    try:
        await sandbox.start(tasks)
    except SandboxUnavailable as exc:
        log.critical("cannot start: %s", exc)
        raise
    return sandbox


def _hand_over(replicas: Replicas, runs: Runs) -> None:
    """SIGTERM: take no runs from the others any more, and hand this replica's background runs over."""
    replicas.draining = True
    runs.hand_over()


def create_app(config: GatewayConfig, drain: Drain | None = None) -> Starlette:
    """The app; `drain` is shared with the server so that SIGTERM can start the graceful shutdown."""
    drain = drain or Drain(config.server.shutdown_grace_s)
    app_metrics = Metrics()
    tracing = Tracing(config.tracing)
    isolation.configure(config.isolation.workers, memory_bytes(config.isolation.memory))

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        harmony.encoding()  # load the vocabulary before the first request, not during it
        agent_spans = TurnSpans() if tracing.enabled else None  # agent turns' traces, kept with their sessions
        tracing.start([agent_spans] if agent_spans is not None else [])
        engines = Engines(config.engine_configs(), app_metrics.engine_resumed)
        storage = config.storage
        database = open_database(storage.database_url(), retry_s=storage.retry_s, pool_size=storage.pool_size)
        try:
            await database.start()
        except StorageError as exc:
            log.critical("cannot start: the database is unavailable: %s", exc)
            raise
        try:
            sealer = await shared_sealer(KeyStore(database), config.server)
        except KeysDoNotOpen as exc:
            log.critical("cannot start: %s", exc)
            raise
        outbox = WebhookOutbox(database)  # a background response's end writes its webhooks with its final record
        store, conversations = ResponseStore(database, ResponseEvents(outbox)), ConversationStore(database)
        replicas = Replicas(database, store, storage)
        await replicas.join()
        renderer = PromptRenderer(config.server.render_processes)
        files = FileService(config.files, FileStore(database), Blobs(config.files_directory()), sealer)
        await files.blobs.start()
        try:
            vector_stores, ingestor = await open_vector_stores(config, database, files, replicas.id, replicas.live, app_metrics)
        except VectorsUnavailable as exc:
            log.critical("cannot start: vector_stores.embeddings is configured, but %s", exc)
            raise
        async with anyio.create_task_group() as group:
            # Nothing is started in the group itself: one child's fault would end every other (supervision.py).
            tasks = Supervisor(group, app_metrics.task_faulted)
            sandbox = await _start_sandbox(config, tasks, replicas, database)
            mcp = MCPServers(config.tool_servers, config.mcp)
            await mcp.start(tasks)
            drain.bind()
            if config.storage.ttl_s is not None:
                tasks.keep("expire_responses", expire_responses, store, config.storage.ttl_s, config.storage.sweep_interval_s)
            tasks.keep("replicas", replicas.run)
            tasks.keep("files_sweep", files.sweep)
            tasks.keep("ingestion", ingestor.run)
            tasks.keep("vector_stores_sweep", vector_stores.sweep)
            tasks.keep("loop_monitor", app_metrics.watch_event_loop, config.server.loop_monitor_interval_s)
            agents = AgentStore(database)
            agent_feed = SessionFeed(agents, tasks)  # its channel registered before the listener starts
            tasks.keep("database_listener", database.keep_listening)
            hooks = config.webhooks
            webhook_sender = Sender(hooks.allowed_urls, hooks.timeout_s, hooks.max_concurrent, hooks.max_tests_per_tenant)
            deliverer = Deliverer(hooks, outbox, webhook_sender, sealer, app_metrics, replicas.id, replicas.lease_s)
            tasks.keep("webhook_deliverer", deliverer.run, database.dialect is Dialect.SQLITE)
            await engines.check()  # an engine down does not stop the start: its model answers 503 until it is back
            tasks.keep("engine_health", engines.watch)
            runs = Runs(tasks, Admission(config.limits.max_concurrent_per_tenant, config.limits.max_concurrent))
            replicas.on_cancel(runs.cancel)
            app_metrics.watch((lambda: sandbox.live_sessions) if sandbox is not None else None, mcp.health, engines.health)
            browser = make_backends(config.browser, mcp) if config.browser is not None else None
            vault_store = VaultStore(database)
            token_refresher = TokenRefresher(vault_store, sealer, replicas.id, config.mcp.allowed_urls, app_metrics)
            app.state.services = Services(
                config=config,
                engines=engines,
                store=store,
                conversations=conversations,
                drain=drain,
                metrics=app_metrics,
                renderer=renderer,
                runs=runs,
                supervisor=tasks,
                replicas=replicas,
                sealer=sealer,
                sandbox=sandbox,
                mcp=mcp,
                browser=browser,
                files=files,
                vector_stores=vector_stores,
                skills=SkillService(SkillStore(database), files.blobs),
                sockets=TenantSockets(),
                webhooks=WebhookStore(database),
                webhook_sender=webhook_sender,
                webhook_outbox=outbox,
                agents=agents,
                agent_feed=agent_feed,
                automations=AutomationStore(database),
                scheduler=Scheduler(),
                vaults=vault_store,
                token_refresher=token_refresher,
                agent_spans=agent_spans,
                agent_environments=EnvironmentStore(database, "agent_environments"),
                agent_templates=EnvironmentStore(database, "agent_environment_templates"),
            )
            serve_every_package(app.state.services)
            shared = database.dialect is Dialect.POSTGRESQL
            tasks.keep("agent_sessions", Turns(app.state.services).recover)  # a dead replica's sessions followed on
            tasks.keep("automations", app.state.services.scheduler.run, app.state.services, not shared)
            replicas.on_adopt(lambda orphan: ResponseRun.adopt(app.state.services, orphan))
            if shared:  # other replicas share the runs: hand them over at SIGTERM
                drain.on_begin(lambda: _hand_over(replicas, runs))
            # What start-up made (vocabulary tables, schemas, modules) lives as long as the process: kept out
            # of the cyclic garbage collector's sweeps, whose full passes would otherwise stall the loop.
            gc.freeze()
            log.info("gateway ready; engines: %s", ", ".join(f"{c.model or '(its model)'} at {c.url}" for c in config.engine_configs()))
            try:
                yield
            finally:
                if shared:  # the runs write their last events and let go before the database closes
                    with anyio.move_on_after(config.server.shutdown_grace_s + 5):
                        await runs.wait_gone()
                mcp.close()
                if browser is not None:
                    await browser.aclose()
                if sandbox is not None:
                    await sandbox.close()
                await engines.aclose()
                deliverer.stop()
                await webhook_sender.aclose()
                await token_refresher.aclose()
                await vector_stores.close()
                renderer.close()
                await replicas.leave()
                await database.close()
                tracing.shutdown()
                group.cancel_scope.cancel()

    return Starlette(
        routes=[
            Route("/health", health, methods=["GET"]),
            Route("/ready", ready, methods=["GET"]),
            Route("/metrics", metrics, methods=["GET"]),
            Route("/v1/models", list_models, methods=["GET"]),
            Route("/v1/models/{model:path}", retrieve_model, methods=["GET"]),
            *response_routes,
            *chat_routes,
            *message_routes,
            *conversation_routes,
            *file_routes,
            *skill_routes,
            *container_routes,
            *vector_store_routes,
            *webhook_routes,
            *environment_routes,
            *automation_routes,
            *vault_routes,
            *agent_routes,
        ],
        exception_handlers={
            APIError: handle_api_error,
            StorageError: handle_storage_error,
            UnstorableValue: handle_unstorable_value,
            HTTPException: handle_http_exception,
            Exception: handle_unexpected,
        },
        lifespan=lifespan,
        middleware=[
            Middleware(GatewayMiddleware, auth=config.auth, metrics=app_metrics, log_access=config.logging.access_log, traced=tracing.enabled)
        ],
    )
