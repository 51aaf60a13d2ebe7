//! Plain types and pure rules shared by every layer: ids, timestamps, channels and provider ids,
//! subscribers, integrations. Nothing here performs I/O or knows about HTTP or SQL.

pub mod channel;
pub mod context;
pub mod endpoint;
pub mod fanout;
pub mod filters;
pub mod id;
pub mod integration;
pub mod job;
pub mod payload_schema;
pub mod preference;
pub mod promotion;
pub mod session;
pub mod skip;
pub mod subscriber;
pub mod time;
pub mod topic;
pub mod unsubscribe;
pub mod webhook;
pub mod workflow;

pub use channel::{Channel, IntegrationKind};
pub use id::{
    new_object_id, EnvironmentId, IntegrationId, JobId, MessageId, NotificationId, ObjectId,
    OrganizationId, SubscriberRef, SubscriptionId, TopicId, WorkflowRef,
};
pub use time::Timestamp;

/// The environment (and its organization) an API key belongs to. Every tenant-data operation takes one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tenant {
    pub organization_id: OrganizationId,
    pub environment_id: EnvironmentId,
}
