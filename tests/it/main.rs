//! The one integration-test binary: every test drives the real HTTP API on SQLite, and again on
//! PostgreSQL in a case of its own, ignored unless asked for (`postgres_test!`): run them with
//! `TIDINGS_TEST_POSTGRES_URL` set and `-- --include-ignored` (or `--ignored` for those alone).

mod support;

mod architecture_doc;
mod auth_and_wire;
mod channels;
mod compatibility;
mod contexts;
mod corpus;
mod delivery;
mod digests;
mod engine;
mod environments;
mod environments_api;
mod erasure;
mod erasure_js;
mod fanout;
mod hardening_edge;
mod hardening_engine;
mod hardening_limits;
mod hardening_ops;
mod hardening_secrets;
mod idempotency;
mod inbox;
mod inbox_instances;
mod inbox_js;
mod inbox_sessions;
mod inbox_sockets;
mod integrations;
mod no_silent_drops;
mod novu_sdk;
mod operability;
mod outbound;
mod pagination;
mod preferences;
mod preferences_v1;
mod preview;
mod promotion;
mod providers_chat;
mod providers_email;
mod providers_sms_push;
mod reads;
mod rendering;
mod secrets_at_rest;
mod server;
mod structure;
mod subscriber_notifications;
mod subscribers;
mod subscribers_bulk;
mod topics;
mod unsubscribe;
mod webhook_deliveries;
mod webhooks;
mod worker_metrics;
mod workflows;
