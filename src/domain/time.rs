//! Timestamps: milliseconds since the Unix epoch in the domain and the database; ISO 8601 with
//! millisecond precision (`2026-11-22T08:15:00.000Z`) on the wire.

use chrono::{DateTime, SecondsFormat, TimeZone, Utc};

/// `Default` is the epoch; it only stands for "not read yet" while a row is being read (see `store::row`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
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
        let mut buf = [0u8; 24];
        match self.iso_str(&mut buf) {
            Some(s) => s.to_owned(),
            None => self.iso_outside_years(),
        }
    }

    /// The ISO form written into `buf` for years 0000–9999; `None` outside them (see [`Self::to_iso`]).
    pub fn iso_str(self, buf: &mut [u8; 24]) -> Option<&str> {
        if self.write_iso(buf) {
            // Only ASCII digits and separators were written.
            std::str::from_utf8(buf).ok()
        } else {
            None
        }
    }

    /// chrono's form, for the years the fast formatter does not cover.
    pub fn iso_outside_years(self) -> String {
        match Utc.timestamp_millis_opt(self.0).single() {
            Some(t) => t.to_rfc3339_opts(SecondsFormat::Millis, true),
            None => "1970-01-01T00:00:00.000Z".to_owned(),
        }
    }

    /// Writes `YYYY-MM-DDTHH:MM:SS.mmmZ` for years 0000–9999 (the civil-from-days conversion of the
    /// proleptic Gregorian calendar); false outside them. Every page renders several timestamps per row, and
    /// chrono's general formatter cost more than the row's database read.
    fn write_iso(self, buf: &mut [u8; 24]) -> bool {
        const DAY_MS: i64 = 86_400_000;
        let days = self.0.div_euclid(DAY_MS);
        let ms_of_day = self.0.rem_euclid(DAY_MS);
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z - era * 146_097;
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = doy - (153 * mp + 2) / 5 + 1;
        let month = if mp < 10 { mp + 3 } else { mp - 9 };
        let year = yoe + era * 400 + i64::from(month <= 2);
        if !(0..=9999).contains(&year) {
            return false;
        }
        let (secs, millis) = (ms_of_day / 1000, ms_of_day % 1000);
        let mut put = |at: usize, value: i64, width: usize| {
            let mut v = value;
            for i in (0..width).rev() {
                buf[at + i] = b'0' + (v % 10) as u8;
                v /= 10;
            }
        };
        put(0, year, 4);
        put(5, month, 2);
        put(8, day, 2);
        put(11, secs / 3600, 2);
        put(14, secs / 60 % 60, 2);
        put(17, secs % 60, 2);
        put(20, millis, 3);
        buf[4] = b'-';
        buf[7] = b'-';
        buf[10] = b'T';
        buf[13] = b':';
        buf[16] = b':';
        buf[19] = b'.';
        buf[23] = b'Z';
        true
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
    fn fast_formatting_agrees_with_chrono() {
        let chrono_iso = |ms: i64| {
            Utc.timestamp_millis_opt(ms)
                .single()
                .unwrap()
                .to_rfc3339_opts(SecondsFormat::Millis, true)
        };
        // Leap days, century rules, the ends of the supported years, and a spread of instants.
        let mut samples = vec![
            0,
            -1,
            951_782_400_000,     // 2000-02-29
            4_107_542_399_999,   // 2100-02-28T23:59:59.999
            4_107_542_400_000,   // 2100-03-01
            -62_167_219_200_000, // 0000-01-01
            253_402_300_799_999, // 9999-12-31T23:59:59.999
            1_795_335_300_123,
        ];
        let mut x: i64 = 0x2545_f491;
        for _ in 0..20_000 {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            samples
                .push(x.rem_euclid(253_402_300_800_000 + 62_167_219_200_000) - 62_167_219_200_000);
        }
        for ms in samples {
            assert_eq!(Timestamp(ms).to_iso(), chrono_iso(ms), "{ms}");
        }
        // Outside 0000–9999 chrono's spelling is used.
        assert_eq!(
            Timestamp(253_402_300_800_000).to_iso(),
            chrono_iso(253_402_300_800_000)
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
