//! Tidings: a notification-delivery backend that speaks the Novu-style HTTP API.
//!
//! Layers (see `docs/` and the README): `api/` (HTTP only) → `service/` (one function per operation)
//! → `store/` (the only SQL). `domain/` holds plain types and pure rules used by every layer.

pub mod api;
pub mod app;
pub mod background;
pub mod config;
pub mod crypto;
pub mod domain;
pub mod engine;
pub mod error;
pub mod metrics;
pub mod outbound;
pub mod providers;
pub mod render;
pub mod server;
pub mod service;
pub mod store;

pub use error::{Error, Result};
