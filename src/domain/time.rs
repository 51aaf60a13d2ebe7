//! Timestamps: milliseconds since the Unix epoch in the domain and the database; ISO 8601 with
//! millisecond precision (`2026-11-22T08:15:00.000Z`) on the wire.

use chrono::{DateTime, SecondsFormat, TimeZone, Utc};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(pub i64);

impl Timestamp {
    pub fn now() -> Self {
        Self(Utc::now().timestamp_millis())
    }

    pub fn millis(self) -> i64 {
        self.0
    }

    /// `2026-11-22T08:15:00.000Z`.
    pub fn to_iso(self) -> String {
        match Utc.timestamp_millis_opt(self.0).single() {
            Some(t) => t.to_rfc3339_opts(SecondsFormat::Millis, true),
            None => "1970-01-01T00:00:00.000Z".to_owned(),
        }
    }

    /// Parses an ISO 8601 / RFC 3339 date-time, or a plain `YYYY-MM-DD` date (midnight UTC).
    pub fn parse(s: &str) -> Option<Self> {
        if let Ok(t) = DateTime::parse_from_rfc3339(s) {
            return Some(Self(t.timestamp_millis()));
        }
        if let Ok(t) = chrono::NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S%.f") {
            return Some(Self(t.and_utc().timestamp_millis()));
        }
        if let Ok(d) = chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d") {
            return Some(Self(d.and_hms_opt(0, 0, 0)?.and_utc().timestamp_millis()));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_with_milliseconds_and_z() {
        assert_eq!(Timestamp(0).to_iso(), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            Timestamp(1_795_335_300_123).to_iso(),
            "2026-11-22T08:15:00.123Z"
        );
    }

    #[test]
    fn parses_common_forms() {
        assert_eq!(
            Timestamp::parse("2026-11-22T08:15:00.123Z"),
            Some(Timestamp(1_795_335_300_123))
        );
        assert_eq!(
            Timestamp::parse("2026-11-22T09:15:00.123+01:00"),
            Some(Timestamp(1_795_335_300_123))
        );
        assert_eq!(Timestamp::parse("1970-01-02"), Some(Timestamp(86_400_000)));
        assert_eq!(Timestamp::parse("yesterday"), None);
    }
}
