//! What operators need (issue 21): rate limits per environment and category, and `/metrics`.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use tidings::api::{router, ApiOptions, AppState};
use tidings::config::RateLimits;

use crate::db_test;
use crate::support::receiver::{Receiver, Reply};
use crate::support::{assert_error, deliver_one, eventually, send, Backend, TestApp};

/// Another server on `app`'s database (another instance), with its own settings and rate-limit state.
pub(crate) struct Server {
    pub(crate) base: String,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Server {
    pub(crate) async fn start(app: &TestApp, options: ApiOptions) -> Self {
        Self::start_on(app, app.store.clone(), options).await
    }

    /// A server on `store` (a store of `app`'s database).
    pub(crate) async fn start_on(
        app: &TestApp,
        store: tidings::store::Store,
        options: ApiOptions,
    ) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let state = AppState::with_options(store, app.profile, options);
        let task = tokio::spawn(async move {
            crate::support::serve(listener, router(state)).await;
        });
        Self { base, task }
    }

    pub(crate) fn req(
        &self,
        app: &TestApp,
        key: &str,
        method: Method,
        path: &str,
    ) -> reqwest::RequestBuilder {
        app.client
            .request(method, format!("{}{path}", self.base))
            .header("Authorization", format!("ApiKey {key}"))
    }
}

pub(crate) fn limits(events: u32, configuration: u32, global: u32) -> ApiOptions {
    ApiOptions {
        rate_limits: RateLimits {
            events,
            configuration,
            global,
            ..RateLimits::default()
        },
        metrics_token: None,
        ..Default::default()
    }
}

pub(crate) fn header(resp: &reqwest::Response, name: &str) -> Option<String> {
    resp.headers()
        .get(name)
        .map(|v| v.to_str().unwrap().to_owned())
}

fn remaining(resp: &reqwest::Response) -> u64 {
    header(resp, "ratelimit-remaining")
        .expect("RateLimit-Remaining")
        .parse()
        .unwrap()
}

async fn status_of(req: reqwest::RequestBuilder) -> StatusCode {
    req.send().await.unwrap().status()
}

async fn rate_limit_headers_on_answers(app: TestApp) {
    // Defaults: configuration 2000/s, a window of 5 s (10,000) and a burst of 11,000.
    let resp = app
        .req(Method::GET, "/v2/subscribers?limit=1")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(header(&resp, "ratelimit-limit").as_deref(), Some("10000"));
    assert_eq!(remaining(&resp), 10_999);
    assert_eq!(header(&resp, "ratelimit-reset").as_deref(), Some("1"));
    assert_eq!(
        header(&resp, "ratelimit-policy").as_deref(),
        Some("10000;w=5;burst=11000;comment=\"token bucket\";category=\"configuration\";cost=\"single\";serviceLevel=\"enterprise\"")
    );
    assert!(header(&resp, "retry-after").is_none());

    // Other categories carry their own policy, errors too (a 404 still spent a token).
    let resp = app
        .req(Method::GET, "/v1/notifications")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert!(header(&resp, "ratelimit-policy").unwrap().starts_with(
        "15000;w=5;burst=16500;comment=\"token bucket\";category=\"global\";cost=\"single\""
    ));
    let resp = app
        .req(Method::POST, "/v1/events/trigger")
        .json(&json!({"name": "missing", "to": "s1"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
    assert!(header(&resp, "ratelimit-policy")
        .unwrap()
        .contains("category=\"trigger\";cost=\"single\""));
    assert_eq!(header(&resp, "ratelimit-limit").as_deref(), Some("30000"));

    // Only API-key callers are limited: no headers on a refused key or a public route.
    let resp = app
        .req_as("not-a-key", Method::GET, "/v1/notifications")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    assert!(header(&resp, "ratelimit-limit").is_none());
    let resp = app
        .client
        .get(app.url("/v1/health-check"))
        .send()
        .await
        .unwrap();
    assert!(header(&resp, "ratelimit-limit").is_none());
}
db_test!(rate_limit_headers, rate_limit_headers_on_answers);

async fn past_the_limit_answers_429(app: TestApp) {
    let before = scrape(&app.base, None).await;
    // global 1/s: a bucket of 5 tokens.
    let server = Server::start(&app, limits(6000, 2000, 1)).await;
    for n in (0..5).rev() {
        let resp = server
            .req(&app, &app.key, Method::GET, "/v1/notifications")
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        assert_eq!(remaining(&resp), n);
    }
    let resp = server
        .req(&app, &app.key, Method::GET, "/v1/notifications")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
    // Retry-After: this request's one token is back in 1 s; RateLimit-Reset: the bucket of 5
    // is full again in 5 s (the IETF draft's "seconds until the quota resets").
    assert_eq!(header(&resp, "retry-after").as_deref(), Some("1"));
    assert_eq!(header(&resp, "ratelimit-reset").as_deref(), Some("5"));
    assert_eq!(remaining(&resp), 0);
    assert_eq!(header(&resp, "ratelimit-limit").as_deref(), Some("5"));
    assert!(header(&resp, "ratelimit-policy")
        .unwrap()
        .starts_with("5;w=5;burst=5;comment=\"token bucket\";category=\"global\""));
    let body: Value = resp.json().await.unwrap();
    assert_error(&body, 429);
    assert_eq!(body["message"], "API rate limit exceeded");
    assert_eq!(body["error"], "Too Many Requests");
    assert_eq!(body["path"], "/v1/notifications");

    // The refusal is counted.
    let after = scrape(&app.base, None).await;
    let rejected = |text: &str| {
        sample(
            text,
            "tidings_rate_limit_rejections_total",
            &[("category", "global")],
        )
    };
    assert!(rejected(&after) >= rejected(&before) + 1.0, "{after}");

    // A keyed write refused by the limit is not the key's answer: once tokens are back it runs.
    let server = Server::start(&app, limits(6000, 1, 6000)).await;
    for _ in 0..5 {
        let id = tidings::domain::new_object_id();
        let (status, _) = send(
            server
                .req(&app, &app.key, Method::POST, "/v2/subscribers")
                .json(&json!({"subscriberId": id})),
        )
        .await;
        assert_eq!(status, StatusCode::CREATED);
    }
    let keyed = || {
        server
            .req(&app, &app.key, Method::POST, "/v2/subscribers")
            .header("idempotency-key", "limited-once")
            .json(&json!({"subscriberId": "keyed"}))
    };
    assert_eq!(status_of(keyed()).await, StatusCode::TOO_MANY_REQUESTS);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let resp = keyed().send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::CREATED);
    assert!(header(&resp, "idempotency-replay").is_none());
}
db_test!(rate_limit_refusal, past_the_limit_answers_429);

async fn bulk_triggers_cost_100(app: TestApp) {
    // events 40/s: a bucket of 220 tokens.
    let server = Server::start(&app, limits(40, 2000, 3000)).await;
    let bulk = || {
        server
            .req(&app, &app.key, Method::POST, "/v1/events/trigger/bulk")
            .json(&json!({"events": [{"name": "missing", "to": "s1"}]}))
    };
    // Refills (40 tokens a second) while the requests run make the figures a little higher.
    let resp = bulk().send().await.unwrap();
    assert_ne!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
    let left = remaining(&resp);
    assert!((120..=130).contains(&left), "{left}");
    assert!(header(&resp, "ratelimit-policy")
        .unwrap()
        .contains("category=\"trigger\";cost=\"bulk\""));
    let resp = bulk().send().await.unwrap();
    assert_ne!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
    let left = remaining(&resp);
    assert!((20..=40).contains(&left), "{left}");
    let resp = bulk().send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
    let wait: u64 = header(&resp, "retry-after").unwrap().parse().unwrap();
    assert!((1..=2).contains(&wait), "{wait}");
    // What is left still pays for single triggers.
    let resp = server
        .req(&app, &app.key, Method::POST, "/v1/events/trigger")
        .json(&json!({"name": "missing", "to": "s1"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
    assert!(header(&resp, "ratelimit-policy")
        .unwrap()
        .contains("cost=\"single\""));
}
db_test!(rate_limit_bulk_cost, bulk_triggers_cost_100);

async fn categories_and_environments_are_independent(app: TestApp) {
    let server = Server::start(&app, limits(1, 1, 1)).await;
    let other = app.second_environment("Other").await;
    let get = |key: &str, path: &str| server.req(&app, key, Method::GET, path);
    for _ in 0..5 {
        assert_eq!(
            status_of(get(&app.key, "/v1/notifications")).await,
            StatusCode::OK
        );
    }
    assert_eq!(
        status_of(get(&app.key, "/v1/messages")).await,
        StatusCode::TOO_MANY_REQUESTS,
        "global is spent"
    );
    // The configuration and trigger buckets are untouched.
    assert_eq!(
        status_of(get(&app.key, "/v2/subscribers")).await,
        StatusCode::OK
    );
    let trigger = server
        .req(&app, &app.key, Method::POST, "/v1/events/trigger")
        .json(&json!({"name": "missing", "to": "s1"}));
    assert_eq!(status_of(trigger).await, StatusCode::NOT_FOUND);
    // Another environment has its own buckets.
    let resp = get(&other, "/v1/notifications").send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(remaining(&resp), 4);
}
db_test!(
    rate_limit_independence,
    categories_and_environments_are_independent
);

async fn zero_turns_a_category_off(app: TestApp) {
    let server = Server::start(&app, limits(1, 1, 0)).await;
    for _ in 0..20 {
        let resp = server
            .req(&app, &app.key, Method::GET, "/v1/notifications")
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        assert!(header(&resp, "ratelimit-limit").is_none());
    }
    let resp = server
        .req(&app, &app.key, Method::GET, "/v2/subscribers")
        .send()
        .await
        .unwrap();
    assert_eq!(header(&resp, "ratelimit-limit").as_deref(), Some("5"));
}
db_test!(rate_limit_zero_disables, zero_turns_a_category_off);

/// On PostgreSQL two instances spend one bucket.
async fn rate_limit_shared_by_instances() {
    let app = TestApp::spawn(Backend::Postgres).await;
    let a = Server::start(&app, limits(6000, 2000, 1)).await;
    let b = Server::start(&app, limits(6000, 2000, 1)).await;
    let get = |s: &Server| s.req(&app, &app.key, Method::GET, "/v1/notifications");
    for server in [&a, &b, &a, &b, &a] {
        assert_eq!(status_of(get(server)).await, StatusCode::OK);
    }
    assert_eq!(status_of(get(&b)).await, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(status_of(get(&a)).await, StatusCode::TOO_MANY_REQUESTS);
    // A third instance started now finds the bucket spent too.
    let c = Server::start(&app, limits(6000, 2000, 1)).await;
    assert_eq!(status_of(get(&c)).await, StatusCode::TOO_MANY_REQUESTS);
}
crate::postgres_test!(
    rate_limit_shared_by_instances_on_postgres,
    rate_limit_shared_by_instances()
);

/// `GET /metrics` of the server at `base`.
pub(crate) async fn scrape(base: &str, token: Option<&str>) -> String {
    let mut req = reqwest::Client::new().get(format!("{base}/metrics"));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let resp = req.send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(
        header(&resp, "content-type").as_deref(),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    resp.text().await.unwrap()
}

/// The sum of the samples of `name` whose labels include `labels` (0 when there is none).
fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let (metric, rest) = series.split_once('{').unwrap_or((series, ""));
            (metric == name
                && labels
                    .iter()
                    .all(|(k, v)| rest.contains(&format!("{k}=\"{v}\""))))
            .then(|| value.parse::<f64>().unwrap())
        })
        .sum()
}

async fn requests_are_counted_by_route_and_status(app: TestApp) {
    let count = |text: &str| {
        sample(
            text,
            "tidings_http_request_duration_seconds_count",
            &[
                ("method", "GET"),
                ("route", "/v2/subscribers/{subscriberId}"),
                ("status", "404"),
            ],
        )
    };
    let before = scrape(&app.base, None).await;
    for _ in 0..3 {
        let (status, _) = app.get("/v2/subscribers/nobody-here").await;
        assert_eq!(status, StatusCode::NOT_FOUND);
    }
    let after = scrape(&app.base, None).await;
    assert!(count(&after) >= count(&before) + 3.0, "{after}");
    // Latencies land in buckets.
    assert!(after.contains("tidings_http_request_duration_seconds_bucket{"));
    assert!(after.contains("# TYPE tidings_http_request_duration_seconds histogram"));
    // The scrape itself is a route of its own, outside the API's document.
    assert!(after.contains("route=\"/metrics\""), "{after}");
    let (_, doc) = send(app.client.get(app.url("/openapi.json"))).await;
    assert!(doc["paths"].get("/metrics").is_none());
}
db_test!(metrics_requests, requests_are_counted_by_route_and_status);

async fn the_metrics_token_is_required_when_set(app: TestApp) {
    let options = ApiOptions {
        metrics_token: Some("scrape-secret-0123456789".into()),
        ..ApiOptions::default()
    };
    let server = Server::start(&app, options).await;
    let url = format!("{}/metrics", server.base);
    for auth in [
        None,
        Some("Bearer wrong"),
        Some("scrape-secret-0123456789"),
        Some(app.key.as_str()),
    ] {
        let mut req = app.client.get(&url);
        if let Some(a) = auth {
            req = req.header("Authorization", a);
        }
        let (status, body) = send(req).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{auth:?}");
        assert_error(&body, 401);
    }
    let text = scrape(&server.base, Some("scrape-secret-0123456789")).await;
    assert!(text.contains("tidings_jobs{state=\"queued\"}"));
    // Without a token the route is open (the test app's server).
    scrape(&app.base, None).await;
}
db_test!(metrics_token, the_metrics_token_is_required_when_set);

async fn queue_figures_and_job_counters(backend: Backend) {
    let app = TestApp::spawn_without_workers(backend).await;
    let (status, out) = app
        .post(
            "/v2/workflows",
            json!({"name": "Ping", "workflowId": "ping", "steps": [
                {"name": "Inbox", "type": "in_app", "controlValues": {"body": "ping"}}]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    let before = scrape(&app.base, None).await;
    let triggers = |t: &str| sample(t, "tidings_triggers_total", &[("status", "processed")]);
    for n in 0..3 {
        let (status, out) = app
            .post(
                "/v1/events/trigger",
                json!({"name": "ping", "to": format!("sub-{n}")}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{out}");
    }
    // No worker runs: the three jobs wait, due; one is claimed by a worker that dies (a 1 ms lease).
    let claimed = app
        .store
        .claim_jobs("dead-worker", 1, 1, false)
        .await
        .unwrap()
        .jobs;
    assert_eq!(claimed.len(), 1);
    // The queue's figures are read at most once a second: `before`'s are still served until then.
    tokio::time::sleep(tidings::metrics::QUEUE_FIGURES_TTL).await;
    let text = scrape(&app.base, None).await;
    let jobs = |state: &str| sample(&text, "tidings_jobs", &[("state", state)]);
    assert_eq!(jobs("queued"), 2.0, "{text}");
    assert_eq!(jobs("running"), 1.0, "{text}");
    assert_eq!(jobs("scheduled"), 0.0, "{text}");
    assert_eq!(sample(&text, "tidings_queue_depth", &[]), 2.0);
    assert!(sample(&text, "tidings_oldest_due_job_lag_seconds", &[]) >= 0.0);
    assert!(text.contains("\ntidings_oldest_due_job_lag_seconds "));
    assert!(triggers(&text) >= triggers(&before) + 3.0, "{text}");

    let finished = |t: &str| sample(t, "tidings_jobs_finished_total", &[("status", "completed")]);
    let expired = |t: &str| sample(t, "tidings_job_lease_expiries_total", &[]);
    app.start_workers();
    // The counters move just after the jobs' commit: wait for both.
    let text = eventually(|| async {
        let text = scrape(&app.base, None).await;
        (sample(&text, "tidings_queue_depth", &[]) == 0.0
            && sample(&text, "tidings_jobs", &[("state", "running")]) == 0.0
            && finished(&text) >= finished(&before) + 3.0
            // The dead worker's job was claimed again once its lease expired.
            && expired(&text) >= expired(&before) + 1.0)
            .then_some(text)
    })
    .await;
    let lag = sample(&text, "tidings_oldest_due_job_lag_seconds", &[]);
    assert_eq!(lag, 0.0);
}
db_test!(metrics_queue, queue_figures_and_job_counters, backend);

async fn deliveries_and_retries_are_counted(app: TestApp) {
    let receiver = Receiver::start().await;
    receiver.reply([Reply::status(503)]);
    app.integration(json!({"providerId": "email-webhook", "channel": "email", "active": true,
        "identifier": "hook", "name": "hook",
        "credentials": {"webhookUrl": format!("{}/hook", receiver.url), "secretKey": "whsec-0123456789abcdef",
            "from": "app@example.com"}}))
        .await;
    let delivered = |t: &str| {
        sample(
            t,
            "tidings_deliveries_total",
            &[("provider", "email-webhook"), ("outcome", "completed")],
        )
    };
    let retried = |t: &str| {
        sample(
            t,
            "tidings_delivery_retries_total",
            &[("provider", "email-webhook")],
        )
    };
    let before = scrape(&app.base, None).await;
    let (job, _) = deliver_one(
        &app,
        "email",
        json!({"subject": "Hi", "body": "<p>Hello</p>"}),
        json!({"to": {"subscriberId": "ann", "email": "ann@example.com"}}),
    )
    .await;
    assert_eq!(job["status"], "completed", "{job}");
    assert_eq!(receiver.requests().len(), 2);
    // The counters move just after the job's commit.
    eventually(|| async {
        let after = scrape(&app.base, None).await;
        (delivered(&after) >= delivered(&before) + 1.0 && retried(&after) >= retried(&before) + 1.0)
            .then_some(())
    })
    .await;
}
db_test!(metrics_deliveries, deliveries_and_retries_are_counted);
