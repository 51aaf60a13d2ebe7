//! Contexts (`/v2/contexts`): create, read, list, replace the data of and delete the contexts that triggers,
//! channel connections and endpoints and Inbox sessions name (the same records: one created here is the one a
//! trigger naming `type:id` renders as `context.<type>`).

use serde_json::{Map, Value};

use crate::domain::context::{valid_part, validate_data, validate_part, Context, ContextEntry};
use crate::domain::{Tenant, Timestamp};
use crate::error::{Error, Result, Validation};
use crate::store::contexts::{ContextFilter, ContextOrder};
use crate::store::page::{Page, PageRequest};
use crate::store::Store;

/// Longest `search` of the list: the longest key (`type:id`, each part at most 100 characters).
pub const MAX_SEARCH: usize = 201;

fn not_found(kind: &str, id: &str) -> Error {
    Error::NotFound(format!(
        "Context with id '{id}' and type '{kind}' was not found"
    ))
}

/// Creates the context `kind:id` with `data` (`{}` when none); a 409 when it exists.
pub async fn create(
    store: &Store,
    tenant: &Tenant,
    kind: &str,
    id: &str,
    data: Option<Value>,
) -> Result<Context> {
    let mut v = Validation::new();
    validate_part(&mut v, "type", kind);
    validate_part(&mut v, "id", id);
    let data = data.unwrap_or_else(|| Value::Object(Map::new()));
    validate_data(&mut v, "data", &data);
    v.finish()?;
    let now = Timestamp::now();
    let context = Context {
        entry: ContextEntry {
            kind: kind.to_owned(),
            id: id.to_owned(),
            data: Some(data),
        },
        created_at: now,
        updated_at: now,
    };
    match store.insert_context(&tenant.environment_id, &context).await {
        Ok(()) => Ok(context),
        Err(Error::Duplicate) => Err(Error::Conflict(format!(
            "Context with type '{kind}' and id '{id}' already exists"
        ))),
        Err(e) => Err(e),
    }
}

/// The context `kind:id` (a type or id no context can have is not found either).
pub async fn get(store: &Store, tenant: &Tenant, kind: &str, id: &str) -> Result<Context> {
    let found = if addressable(kind, id) {
        store.get_context(&tenant.environment_id, kind, id).await?
    } else {
        None
    };
    found.ok_or_else(|| not_found(kind, id))
}

/// Checks the list's filters and reads a page.
pub async fn list(
    store: &Store,
    tenant: &Tenant,
    filter: &ContextFilter,
    page: &PageRequest<ContextOrder>,
) -> Result<Page<Context>> {
    let mut v = Validation::new();
    if let Some(kind) = &filter.kind {
        validate_part(&mut v, "type", kind);
    }
    if let Some(id) = &filter.id {
        validate_part(&mut v, "id", id);
    }
    if let Some(search) = &filter.search {
        if search.is_empty() || search.chars().count() > MAX_SEARCH {
            v.add(
                "search",
                format!("search must be 1 to {MAX_SEARCH} characters"),
                search.as_str(),
            );
        }
    }
    v.finish()?;
    store
        .list_contexts(&tenant.environment_id, filter, page)
        .await
}

/// Replaces the data of the context `kind:id`.
pub async fn update(
    store: &Store,
    tenant: &Tenant,
    kind: &str,
    id: &str,
    data: Value,
) -> Result<Context> {
    let mut v = Validation::new();
    validate_data(&mut v, "data", &data);
    v.finish()?;
    let updated = if addressable(kind, id) {
        let now = Timestamp::now();
        store
            .update_context_data(&tenant.environment_id, kind, id, data, now)
            .await?
    } else {
        None
    };
    updated.ok_or_else(|| not_found(kind, id))
}

/// Deletes the context `kind:id`. Channel connections and endpoints that name it keep its key (as in Novu);
/// a later trigger or connection naming it records it again, without data.
pub async fn delete(store: &Store, tenant: &Tenant, kind: &str, id: &str) -> Result<()> {
    let deleted = addressable(kind, id)
        && store
            .delete_context(&tenant.environment_id, kind, id)
            .await?;
    if !deleted {
        return Err(not_found(kind, id));
    }
    Ok(())
}

/// Whether `kind:id` could be a context at all (a path longer or odder than any is not looked up).
fn addressable(kind: &str, id: &str) -> bool {
    valid_part(kind) && valid_part(id)
}
