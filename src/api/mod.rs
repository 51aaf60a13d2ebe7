//! HTTP only: auth, idempotency, extractors, handlers, DTOs, error → status. A handler extracts, calls one
//! `service::` function and maps the result to an `…Out` DTO.

pub mod auth;
pub mod docs;
pub mod error;
pub mod extract;
pub mod idempotency;
pub mod inbox;
pub mod limits;
pub mod metrics;
pub mod pagination;
pub mod ratelimit;
pub mod request_log;
pub mod socket;
pub mod svix;
pub mod svix_messages;
pub mod v1;
pub mod v2;
pub mod wire;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Router;
use serde_json::Map;
use sha2::Digest;
use utoipa::OpenApi;
use utoipa_axum::router::{OpenApiRouter, UtoipaMethodRouter};
use utoipa_axum::routes;

use crate::config::WireProfile;
use crate::store::Store;

/// Shared by every handler (axum clones it for each request and extractor: one reference count).
#[derive(Clone)]
pub struct AppState(Arc<Shared>);

/// What [`AppState`] shares.
pub struct Shared {
    pub store: Store,
    /// Records triggers in group commits, handing due first jobs to this process's workers (`wakeup`).
    pub triggers: crate::engine::TriggerWriter,
    pub profile: WireProfile,
    pub keys: auth::KeyCache,
    /// Wakes this process's workers when a trigger queues jobs.
    pub wakeup: crate::engine::Wakeup,
    /// Rate limits per environment and category (see [`ratelimit`]).
    pub limiter: ratelimit::Limiter,
    /// SHA-256 of the bearer token `/metrics` requires, if any.
    pub metrics_token: Option<[u8; 32]>,
    /// The queue's figures `/metrics` shows, read at most once a second.
    pub queue_figures: crate::metrics::QueueFigures,
    pub limits: limits::RequestLimits,
    /// Set when the process begins to shut down: readiness answers 503 from then on.
    pub draining: Arc<AtomicBool>,
    /// Which browser origins may call the Inbox's routes and socket.
    pub cors: tower_http::cors::CorsLayer,
    pub inbox_origins: inbox::Origins,
    /// The caps on the Inbox's sockets.
    pub socket_limits: socket::SocketLimits,
    /// One slot per open socket (the cap of [`socket::SocketLimits::max`]).
    pub socket_slots: Arc<tokio::sync::Semaphore>,
    /// The Inbox's sockets, once [`router`] made their layer (closed at shutdown: [`socket::close`]).
    pub sockets: std::sync::OnceLock<socketioxide::SocketIo>,
    /// Cancelled when the process stops (`tidings serve` hands its one shutdown token): ends the Inbox's
    /// loops (`service::inbox_socket::spawn_loops`: presence, snoozes).
    pub background: tokio_util::sync::CancellationToken,
}

/// Operators' settings of the API (besides the wire profile). No `Debug`: it holds the metrics token.
#[derive(Clone, Default)]
pub struct ApiOptions {
    pub rate_limits: crate::config::RateLimits,
    pub metrics_token: Option<String>,
    /// Body and request timeouts.
    pub limits: limits::RequestLimits,
    /// The browser origins the Inbox's routes and socket answer; empty: any.
    pub inbox_origins: Vec<String>,
    /// Reverse proxies whose `X-Forwarded-For` names the client (limits by address); empty: none.
    pub trusted_proxies: Vec<ratelimit::Network>,
    /// The caps on the Inbox's sockets.
    pub sockets: socket::SocketLimits,
    /// The process's one shutdown token: the Inbox's loops stop when it is cancelled (by default a token of
    /// this state's own).
    pub shutdown: tokio_util::sync::CancellationToken,
}

impl AppState {
    /// A state with the default [`ApiOptions`].
    pub fn new(store: Store, profile: WireProfile) -> Self {
        Self::with_options(store, profile, ApiOptions::default())
    }

    pub fn with_options(store: Store, profile: WireProfile, options: ApiOptions) -> Self {
        let wakeup = crate::engine::Wakeup::default();
        let origins = inbox::Origins::new(&options.inbox_origins);
        Self(Arc::new(Shared {
            triggers: crate::engine::TriggerWriter::new(store.clone(), wakeup.handoff().clone()),
            limiter: ratelimit::Limiter::new(options.rate_limits, options.trusted_proxies, &store),
            metrics_token: options
                .metrics_token
                .map(|t| sha2::Sha256::digest(t.as_bytes()).into()),
            queue_figures: Default::default(),
            store,
            profile,
            keys: auth::KeyCache::default(),
            wakeup,
            limits: options.limits,
            draining: Arc::default(),
            cors: inbox::cors(&origins),
            inbox_origins: origins,
            socket_slots: Arc::new(tokio::sync::Semaphore::new(options.sockets.max)),
            socket_limits: options.sockets,
            sockets: std::sync::OnceLock::new(),
            background: options.shutdown,
        }))
    }
}

impl std::ops::Deref for AppState {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}

#[derive(OpenApi)]
#[openapi(
    info(title = "Tidings API", description = "Notification delivery: subscribers, integrations, channels, workflows, events."),
    modifiers(&ApiKeyAuthModifier),
    security(("ApiKey" = [])),
    tags(
        (name = "Subscribers"), (name = "Topics"), (name = "Integrations"), (name = "Channel connections"), (name = "Channel endpoints"),
        (name = "Workflows"), (name = "Events"), (name = "Notifications"), (name = "Messages"), (name = "Unsubscribe"),
        (name = "Inbox", description = "The subscriber-facing API of Novu's Inbox, for browsers (`@novu/js`)"), (name = "Health"),
    )
)]
struct ApiDoc;

use docs::ApiKeyAuth as ApiKeyAuthModifier;

/// Collects routes and their OpenAPI description, each route named for the request log
/// ([`request_log::RouteLayer`]) and, when authenticated, behind the [`auth::Gate`] (inside the name, so a
/// refused key is logged with its route).
struct Routes {
    router: OpenApiRouter<AppState>,
    gate: Option<auth::GateLayer>,
}

impl Routes {
    /// Routes behind `gate` (authenticated), or public ones.
    fn new(openapi: utoipa::openapi::OpenApi, gate: Option<auth::GateLayer>) -> Self {
        Self {
            router: OpenApiRouter::with_openapi(openapi),
            gate,
        }
    }

    fn routes(mut self, (schemas, paths, handlers): UtoipaMethodRouter<AppState>) -> Self {
        // `routes!` puts the handlers of one path together: one template.
        let template = paths
            .paths
            .keys()
            .next()
            .map_or(request_log::UNMATCHED, String::as_str);
        let name = request_log::RouteLayer::new(template);
        let handlers = match &self.gate {
            Some(gate) => handlers.layer(gate.for_route(template)),
            None => handlers,
        };
        self.router = self.router.routes((schemas, paths, handlers.layer(name)));
        self
    }
}

/// The authenticated API routes and their OpenAPI description.
fn api_routes(state: &AppState) -> OpenApiRouter<AppState> {
    let routes = Routes::new(ApiDoc::openapi(), Some(auth::GateLayer::new(state.clone())));
    webhook_routes(delivery_routes(subscriber_routes(routes))).router
}

/// The Svix-compatible management of the environment's webhook endpoints ([`svix`]).
fn webhook_routes(routes: Routes) -> Routes {
    routes
        .routes(routes!(svix::list_endpoints, svix::create_endpoint))
        .routes(routes!(
            svix::get_endpoint,
            svix::replace_endpoint,
            svix::patch_endpoint,
            svix::delete_endpoint
        ))
        .routes(routes!(svix::get_endpoint_secret))
        .routes(routes!(svix::rotate_endpoint_secret))
        .routes(routes!(svix_messages::attempts_of_endpoint))
        .routes(routes!(svix_messages::attempts_of_message))
        .routes(routes!(svix_messages::messages_of_endpoint))
        .routes(routes!(svix_messages::destinations))
        .routes(routes!(svix_messages::send_example))
        .routes(routes!(svix_messages::recover))
}

/// Subscribers, topics, contexts, environments, preferences and subscriber credentials.
fn subscriber_routes(routes: Routes) -> Routes {
    routes
        .routes(routes!(
            v2::subscribers::search_subscribers,
            v2::subscribers::create_subscriber
        ))
        .routes(routes!(
            v2::subscribers::get_subscriber,
            v2::subscribers::patch_subscriber,
            v2::subscribers::delete_subscriber
        ))
        .routes(routes!(v2::topics::list_topics, v2::topics::upsert_topic))
        .routes(routes!(
            v2::topics::get_topic,
            v2::topics::patch_topic,
            v2::topics::delete_topic
        ))
        .routes(routes!(
            v2::topics::list_subscriptions,
            v2::topics::create_subscriptions,
            v2::topics::delete_subscriptions
        ))
        .routes(routes!(
            v2::topics::get_subscription,
            v2::topics::patch_subscription
        ))
        .routes(routes!(v2::topics::list_subscriber_subscriptions))
        .routes(routes!(
            v2::contexts::list_contexts,
            v2::contexts::create_context
        ))
        .routes(routes!(
            v2::contexts::get_context,
            v2::contexts::update_context,
            v2::contexts::delete_context
        ))
        .routes(routes!(
            v1::environments::list_environments,
            v1::environments::create_environment
        ))
        .routes(routes!(
            v1::environments::update_environment,
            v1::environments::delete_environment
        ))
        .routes(routes!(v2::subscriber_notifications::list_notifications))
        .routes(routes!(v2::subscriber_notifications::count_notifications))
        .routes(routes!(v2::subscriber_notifications::read))
        .routes(routes!(v2::subscriber_notifications::unread))
        .routes(routes!(v2::subscriber_notifications::archive))
        .routes(routes!(v2::subscriber_notifications::unarchive))
        .routes(routes!(v2::subscriber_notifications::snooze))
        .routes(routes!(v2::subscriber_notifications::unsnooze))
        .routes(routes!(v2::subscriber_notifications::complete_action))
        .routes(routes!(v2::subscriber_notifications::revert_action))
        .routes(routes!(v2::subscriber_notifications::delete_notification))
        .routes(routes!(v2::subscriber_notifications::mark_as_seen))
        .routes(routes!(v2::subscriber_notifications::mark_all_as_read))
        .routes(routes!(v2::subscriber_notifications::archive_all))
        .routes(routes!(v2::subscriber_notifications::archive_all_read))
        .routes(routes!(v2::subscriber_notifications::delete_all))
        .routes(routes!(v1::environments::current_environment))
        .routes(routes!(v1::environments::end_sessions))
        .routes(routes!(v1::topics::get_topic_subscriber))
        .routes(routes!(v1::topics::list_topics, v1::topics::create_topic))
        .routes(routes!(
            v1::topics::get_topic,
            v1::topics::rename_topic,
            v1::topics::delete_topic
        ))
        .routes(routes!(v1::topics::add_subscribers))
        .routes(routes!(v1::topics::remove_subscribers))
        .routes(routes!(
            v2::preferences::get_preferences,
            v2::preferences::patch_preferences
        ))
        .routes(routes!(v2::preferences::bulk_preferences))
        .routes(routes!(
            v1::preferences::list_preferences,
            v1::preferences::patch_global_preference
        ))
        .routes(routes!(
            v1::preferences::preferences_by_level,
            v1::preferences::patch_workflow_preference
        ))
        .routes(routes!(
            v1::subscriber_credentials::put_credentials,
            v1::subscriber_credentials::patch_credentials
        ))
        .routes(routes!(v1::subscriber_credentials::delete_credentials))
        .routes(routes!(v1::subscribers_bulk::create_bulk))
        .routes(routes!(v1::subscribers_bulk::update_online_status))
}

/// Integrations, events, notifications, messages, workflows, the step preview and channels.
fn delivery_routes(routes: Routes) -> Routes {
    routes
        .routes(routes!(
            v1::integrations::list_integrations,
            v1::integrations::create_integration
        ))
        .routes(routes!(v1::integrations::list_active_integrations))
        .routes(routes!(
            v1::integrations::update_integration,
            v1::integrations::delete_integration
        ))
        .routes(routes!(v1::integrations::set_primary_integration))
        .routes(routes!(v1::events::trigger_event))
        .routes(routes!(v1::events::trigger_bulk))
        .routes(routes!(v1::events::trigger_broadcast))
        .routes(routes!(v1::events::cancel_trigger))
        .routes(routes!(v1::notifications::list_notifications))
        .routes(routes!(v1::notifications::get_notification))
        .routes(routes!(v1::messages::list_messages))
        .routes(routes!(v1::messages::delete_message))
        .routes(routes!(v1::messages::delete_by_transaction))
        .routes(routes!(v1::messages::subscriber_feed))
        .routes(routes!(v1::messages::unseen_count))
        .routes(routes!(v1::messages::mark_as))
        .routes(routes!(v1::messages::mark_all))
        .routes(routes!(v1::messages::message_action))
        .routes(routes!(
            v2::workflows::list_workflows,
            v2::workflows::create_workflow
        ))
        .routes(routes!(
            v2::workflows::get_workflow,
            v2::workflows::update_workflow,
            v2::workflows::patch_workflow,
            v2::workflows::delete_workflow
        ))
        .routes(routes!(v2::preview::preview_step))
        .routes(routes!(v2::workflows::get_step))
        .routes(routes!(v2::workflows::sync_workflow))
        .routes(routes!(v2::environments::environment_tags))
        .routes(routes!(v2::environments::diff_environment))
        .routes(routes!(v2::environments::publish_environment))
        .routes(routes!(
            v1::channels::list_channel_connections,
            v1::channels::create_channel_connection
        ))
        .routes(routes!(
            v1::channels::get_channel_connection,
            v1::channels::patch_channel_connection,
            v1::channels::delete_channel_connection
        ))
        .routes(routes!(
            v1::channels::list_channel_endpoints,
            v1::channels::create_channel_endpoint
        ))
        .routes(routes!(
            v1::channels::get_channel_endpoint,
            v1::channels::patch_channel_endpoint,
            v1::channels::delete_channel_endpoint
        ))
}

/// The Inbox's routes (see [`inbox`]): the session is public, the others behind [`inbox::require_session`],
/// all behind the limit per client address ([`inbox::limit_address`]); the CORS layer of [`router`] lets
/// browsers call them.
fn inbox_routes(state: &AppState) -> OpenApiRouter<AppState> {
    let authed = Routes::new(Default::default(), None)
        .routes(routes!(inbox::list_notifications))
        .routes(routes!(inbox::count_notifications))
        .routes(routes!(inbox::read))
        .routes(routes!(inbox::unread))
        .routes(routes!(inbox::archive))
        .routes(routes!(inbox::unarchive))
        .routes(routes!(inbox::snooze))
        .routes(routes!(inbox::unsnooze))
        .routes(routes!(inbox::complete))
        .routes(routes!(inbox::revert))
        .routes(routes!(inbox::delete))
        .routes(routes!(inbox::seen_many))
        .routes(routes!(inbox::read_all))
        .routes(routes!(inbox::archive_all))
        .routes(routes!(inbox::archive_read))
        .routes(routes!(inbox::delete_all))
        .routes(routes!(
            inbox::list_preferences,
            inbox::patch_global_preference
        ))
        .routes(routes!(inbox::global_preference))
        .routes(routes!(inbox::bulk_preferences))
        .routes(routes!(inbox::patch_workflow_preference))
        .routes(routes!(
            inbox::list_subscriptions,
            inbox::create_subscription
        ))
        .routes(routes!(
            inbox::get_subscription,
            inbox::update_subscription,
            inbox::delete_subscription
        ))
        .router
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            inbox::require_session,
        ));
    Routes::new(Default::default(), None)
        .routes(routes!(inbox::open_session))
        .router
        .merge(authed)
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            inbox::limit_address,
        ))
}

/// The complete application: public routes (health checks; unsubscribe links, whose signed token is their
/// credential and is checked before any read), authenticated routes, and the middleware stack.
pub fn router(state: AppState) -> Router {
    let (sockets, io) = socket::layer(state.store.clone(), state.socket_limits);
    crate::service::inbox_socket::spawn_loops(
        state.store.clone(),
        socket::Held::new(io.clone(), state.store.clone()),
        state.background.clone(),
    );
    let _ = state.sockets.set(io);
    tokio::spawn(auth::forget_deleted_environments(state.clone()));
    let (authed, mut openapi) = api_routes(&state).split_for_parts();
    let (public, public_doc) = Routes::new(Default::default(), None)
        .routes(routes!(health_check))
        .routes(routes!(readiness))
        .routes(routes!(
            v1::unsubscribe::unsubscribe_page,
            v1::unsubscribe::unsubscribe
        ))
        .router
        .split_for_parts();
    openapi.merge(public_doc);
    let (inbox, inbox_doc) = inbox_routes(&state).split_for_parts();
    openapi.merge(inbox_doc);
    Router::new()
        .merge(authed)
        .merge(public)
        .merge(inbox)
        .merge(docs::routes(openapi, state.profile))
        .merge(metrics::routes())
        // Novu's routes that Tidings lacks, and methods a path does not serve, answer 404 like any
        // unknown route: a 405 would tell a client the route exists.
        .fallback(not_found)
        .method_not_allowed_fallback(not_found)
        .with_state(state.clone())
        // One body limit, [`limits::MAX_BODY`], applied by the limits layer before anything reads the body.
        // Answers browsers' preflight requests before routing; lets only the Inbox's paths be called from a page.
        .layer(state.cors.clone())
        .layer(axum::extract::DefaultBodyLimit::disable())
        .layer(limits::LimitsLayer(state.limits))
        .layer(wire::ContextLayer(state.profile))
        .layer(request_log::LogLayer)
        // The Inbox's socket (`/socket.io/`) is answered before the API's layers: its handshake is no API call.
        .layer(sockets)
        // Only with a session token that verifies (no database read).
        .layer(axum::middleware::from_fn_with_state(
            state,
            socket::refuse_without_session,
        ))
}

/// Liveness of the process (no storage: the benchmark's ceiling). Readiness is `/v1/health-check/ready`.
#[utoipa::path(get, path = "/v1/health-check", tag = "Health", security(()),
    responses((status = 200, description = "The process is up")))]
async fn health_check() -> Response {
    wire::Reply::ok(serde_json::json!({ "status": "ok" })).into_response()
}

/// Readiness: the database answers and the process is not shutting down.
#[utoipa::path(get, path = "/v1/health-check/ready", tag = "Health", security(()),
    responses((status = 200, description = "The database answers"), (status = 503, description = "The database is unreachable, or the process is shutting down")))]
async fn readiness(State(state): State<AppState>) -> Response {
    if state.draining.load(Ordering::SeqCst) {
        return error::error_response(StatusCode::SERVICE_UNAVAILABLE, "Shutting down", Map::new());
    }
    match state.store.ping().await {
        Ok(()) => {
            wire::Reply::ok(serde_json::json!({ "status": "ok", "database": "up" })).into_response()
        }
        Err(e) => {
            tracing::warn!(error = ?e, "readiness: database unreachable");
            error::error_response(
                StatusCode::SERVICE_UNAVAILABLE,
                "Database unreachable",
                Map::new(),
            )
        }
    }
}

/// Any method and path Tidings does not serve, worded as Novu words it.
async fn not_found(method: axum::http::Method) -> Response {
    error::error_response(
        StatusCode::NOT_FOUND,
        &format!("Cannot {method} {}", wire::request_path()),
        Map::new(),
    )
}
