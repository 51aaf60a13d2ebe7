//! The crate's error type. Variants name outcomes, not statuses; `api::error` alone maps them to HTTP.

use serde_json::{Map, Value};

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// One field's validation failure, reported as `errors.<field>` in a 422 body.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    pub field: String,
    pub messages: Vec<String>,
    pub value: Value,
}

/// Collects field errors so a request reports all of them at once.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Validation(pub Vec<FieldError>);

impl Validation {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn add(&mut self, field: &str, message: impl Into<String>, value: impl Into<Value>) {
        let message = message.into();
        if let Some(existing) = self.0.iter_mut().find(|e| e.field == field) {
            existing.messages.push(message);
        } else {
            self.0.push(FieldError {
                field: field.to_owned(),
                messages: vec![message],
                value: value.into(),
            });
        }
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `Ok(())` when nothing was added, else the 422 error.
    pub fn finish(self) -> Result<()> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(Error::Validation(self))
        }
    }
}

impl std::fmt::Display for Validation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self
            .0
            .iter()
            .map(|e| format!("{}: {}", e.field, e.messages.join(", ")))
            .collect();
        write!(f, "Validation failed: {}", parts.join("; "))
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Malformed body, path or query (422).
    #[error("{0}")]
    Validation(Validation),
    /// A business rule was violated (400). `extra` keys are added to the error body.
    #[error("{message}")]
    BadRequest {
        message: String,
        extra: Map<String, Value>,
    },
    /// Missing, malformed or unknown credentials (401).
    #[error("{0}")]
    Unauthorized(String),
    /// The caller may not do this to that resource, which exists (403): an API key acting on another
    /// environment than its own (updating it, promoting from it).
    #[error("{0}")]
    Forbidden(String),
    /// The resource does not exist in the caller's environment (404).
    #[error("{0}")]
    NotFound(String),
    /// The request collides with an existing resource (409).
    #[error("{0}")]
    Conflict(String),
    /// A write of the store collided with a unique key (an identifier already taken). The service that
    /// made the write says what collided, as a [`Error::Conflict`]; unnamed, it is a 409 with this text.
    #[error("already exists")]
    Duplicate,
    /// Anything unexpected (500); the details are logged, never sent.
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

impl Error {
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::BadRequest {
            message: message.into(),
            extra: Map::new(),
        }
    }

    /// A 422 for a single field.
    pub fn invalid(field: &str, message: impl Into<String>, value: impl Into<Value>) -> Self {
        let mut v = Validation::new();
        v.add(field, message, value);
        Self::Validation(v)
    }
}

impl From<sqlx::Error> for Error {
    fn from(e: sqlx::Error) -> Self {
        Self::Internal(e.into())
    }
}

impl From<sqlx::migrate::MigrateError> for Error {
    fn from(e: sqlx::migrate::MigrateError) -> Self {
        Self::Internal(e.into())
    }
}

impl From<serde_json::Error> for Error {
    fn from(e: serde_json::Error) -> Self {
        Self::Internal(e.into())
    }
}
