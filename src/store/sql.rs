//! A small portable SQL builder for dynamic statements: text with `$n` placeholders numbered in order,
//! plus the values to bind. The same [`Sql`] runs on either driver (see [`bind_args!`]).

use serde_json::Value;

use super::Dialect;
use crate::domain::id::Id;

/// A value to bind. Every variant encodes on both SQLite and PostgreSQL.
#[derive(Debug, Clone, PartialEq)]
pub enum Arg {
    Text(String),
    OptText(Option<String>),
    Int(i64),
    OptInt(Option<i64>),
    Bool(bool),
    OptBool(Option<bool>),
    Json(Value),
    OptJson(Option<Value>),
    Bytes(Vec<u8>),
}

impl From<&str> for Arg {
    fn from(s: &str) -> Self {
        Arg::Text(s.to_owned())
    }
}
impl From<String> for Arg {
    fn from(s: String) -> Self {
        Arg::Text(s)
    }
}
impl From<&String> for Arg {
    fn from(s: &String) -> Self {
        Arg::Text(s.clone())
    }
}
/// Ids are bound as their text.
impl<T: Id> From<&T> for Arg {
    fn from(id: &T) -> Self {
        Arg::Text(id.as_ref().to_owned())
    }
}
impl From<Option<String>> for Arg {
    fn from(s: Option<String>) -> Self {
        Arg::OptText(s)
    }
}
impl From<i64> for Arg {
    fn from(v: i64) -> Self {
        Arg::Int(v)
    }
}
impl From<Option<i64>> for Arg {
    fn from(v: Option<i64>) -> Self {
        Arg::OptInt(v)
    }
}
impl From<bool> for Arg {
    fn from(v: bool) -> Self {
        Arg::Bool(v)
    }
}
impl From<Option<bool>> for Arg {
    fn from(v: Option<bool>) -> Self {
        Arg::OptBool(v)
    }
}
impl From<Value> for Arg {
    fn from(v: Value) -> Self {
        Arg::Json(v)
    }
}
impl From<Option<Value>> for Arg {
    fn from(v: Option<Value>) -> Self {
        Arg::OptJson(v)
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sql {
    pub text: String,
    pub args: Vec<Arg>,
}

impl Sql {
    pub fn new(text: &str) -> Self {
        Self {
            text: text.to_owned(),
            args: Vec::new(),
        }
    }

    pub fn push(&mut self, text: &str) -> &mut Self {
        self.text.push_str(text);
        self
    }

    /// Appends the next placeholder and remembers its value.
    pub fn bind(&mut self, arg: impl Into<Arg>) -> &mut Self {
        self.args.push(arg.into());
        self.text.push('$');
        self.text.push_str(&self.args.len().to_string());
        self
    }

    /// Appends ` and <column> in ($n, …)` with one placeholder per value.
    pub fn push_in(&mut self, column: &str, values: &[impl AsRef<str>]) -> &mut Self {
        self.push(" and ").push(column).push(" in (");
        for (i, v) in values.iter().enumerate() {
            if i > 0 {
                self.push(", ");
            }
            self.bind(v.as_ref());
        }
        self.push(")")
    }

    /// Appends ` and exists (…)`: some element of the JSON array of strings in `column` is one of `values`.
    pub fn push_any_element(
        &mut self,
        dialect: Dialect,
        column: &str,
        values: &[impl AsRef<str>],
    ) -> &mut Self {
        // Each dialect has its own function listing a JSON array's elements.
        let elements = match dialect {
            Dialect::Sqlite => format!("json_each({column})"),
            Dialect::Postgres => format!("jsonb_array_elements_text({column}) as t(value)"),
        };
        self.push(" and exists (select 1 from ")
            .push(&elements)
            .push(" where true");
        self.push_in("value", values).push(")")
    }

    /// ` and <column> = <value>` written so that no index serves it (`<column> || '' = …`, valid on both
    /// databases). For lookups by primary key (`id in (…)`) that also check the tenant: without statistics
    /// SQLite otherwise prefers the tenant's index and scans every row of the environment.
    pub fn push_tenant_check(&mut self, column: &str, value: &str) -> &mut Self {
        self.push(" and ")
            .push(column)
            .push(" || '' = ")
            .bind(value)
    }

    /// Appends another fragment, renumbering its placeholders after ours.
    pub fn append(&mut self, other: &Sql) -> &mut Self {
        let offset = self.args.len();
        let mut chars = other.text.chars().peekable();
        while let Some(c) = chars.next() {
            if c == '$' && chars.peek().is_some_and(|d| d.is_ascii_digit()) {
                let mut n = String::new();
                while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
                    n.push(*d);
                    chars.next();
                }
                let n: usize = n.parse().unwrap_or(0);
                self.text.push('$');
                self.text.push_str(&(n + offset).to_string());
            } else {
                self.text.push(c);
            }
        }
        self.args.extend(other.args.iter().cloned());
        self
    }
}

/// Binds every [`Arg`] of `$args` onto the sqlx query `$q` (works for `query`, `query_as`, `query_scalar`).
macro_rules! bind_args {
    ($q:expr, $args:expr) => {{
        let mut q = $q;
        for a in $args {
            q = match a {
                $crate::store::sql::Arg::Text(v) => q.bind(v),
                $crate::store::sql::Arg::OptText(v) => q.bind(v),
                $crate::store::sql::Arg::Int(v) => q.bind(v),
                $crate::store::sql::Arg::OptInt(v) => q.bind(v),
                $crate::store::sql::Arg::Bool(v) => q.bind(v),
                $crate::store::sql::Arg::OptBool(v) => q.bind(v),
                $crate::store::sql::Arg::Json(v) => q.bind(sqlx::types::Json(v)),
                $crate::store::sql::Arg::OptJson(v) => q.bind(v.map(sqlx::types::Json)),
                $crate::store::sql::Arg::Bytes(v) => q.bind(v),
            };
        }
        q
    }};
}
pub(crate) use bind_args;

/// Escapes `%`, `_` and `\` for a `like … escape '\'` pattern.
pub fn like_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    for c in s.chars() {
        if matches!(c, '%' | '_' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Escapes `*`, `?` and `[` for a SQLite `glob` pattern.
pub fn glob_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    for c in s.chars() {
        match c {
            '*' => out.push_str("[*]"),
            '?' => out.push_str("[?]"),
            '[' => out.push_str("[[]"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_numbered_and_renumbered() {
        let mut a = Sql::new("select 1 where a = ");
        a.bind("x").push(" and b = ").bind(2i64);
        let mut f = Sql::new("");
        f.push("c = ").bind(true).push(" and d = $9x");
        a.push(" and ").append(&f);
        assert_eq!(
            a.text,
            "select 1 where a = $1 and b = $2 and c = $3 and d = $11x"
        );
        assert_eq!(a.args.len(), 3);
    }

    #[test]
    fn escapes() {
        assert_eq!(like_escape("a%b_c\\"), "a\\%b\\_c\\\\");
        assert_eq!(glob_escape("a*b?[c"), "a[*]b[?][[]c");
    }
}
