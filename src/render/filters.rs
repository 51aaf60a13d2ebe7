//! Filters added to Liquid's standard library so templates written for LiquidJS render the same:
//!
//! - `date` replaces the standard one: it also reads ISO 8601 / RFC 3339 timestamps
//!   (`2026-11-22T08:15:00.000Z`, `2026-11-22`), the form every Tidings timestamp and most
//!   payloads use, which the standard filter leaves untouched. Formatting is unchanged (Ruby
//!   `strftime`), and input that is not a date is returned as is.
//! - `json` (LiquidJS built-in): the input as JSON text, e.g. for http_request bodies.

use chrono::{DateTime as ChronoDateTime, NaiveDate, NaiveDateTime};
use liquid::model::{DateTime, ScalarCow};
use liquid_core::{
    Display_filter, Error, Expression, Filter, FilterParameters, FilterReflection,
    FromFilterParameters, ParseFilter, Result, Runtime, Value, ValueView,
};
use serde::de::IntoDeserializer;
use serde::Deserialize;

#[derive(Debug, FilterParameters)]
struct DateArgs {
    #[parameter(description = "The format to return the date in.", arg_type = "str")]
    format: Expression,
}

/// `date`, reading ISO 8601 input too.
#[derive(Clone, ParseFilter, FilterReflection)]
#[filter(
    name = "date",
    description = "Converts a timestamp (ISO 8601 or Liquid formats) into another date format.",
    parameters(DateArgs),
    parsed(DateFilter)
)]
pub(crate) struct Date;

#[derive(Debug, FromFilterParameters, Display_filter)]
#[name = "date"]
struct DateFilter {
    #[parameters]
    args: DateArgs,
}

impl Filter for DateFilter {
    fn evaluate(&self, input: &dyn ValueView, runtime: &dyn Runtime) -> Result<Value> {
        let args = self.args.evaluate(runtime)?;
        let date = input.as_scalar().and_then(|s| parse_date(&s));
        match date {
            Some(date) if !args.format.is_empty() => {
                let s = date.format(args.format.as_str()).map_err(|_err| {
                    Error::with_msg(format!("Invalid date-format string: {}", args.format))
                })?;
                Ok(Value::scalar(s))
            }
            _ => Ok(input.to_value()),
        }
    }
}

/// Unix seconds, ISO 8601, then Liquid's own formats (`now`, `2016-06-13 02:30:00 +0300`, …).
fn parse_date(input: &ScalarCow<'_>) -> Option<DateTime> {
    let text = input.to_kstr();
    let text = text.as_str().trim();
    let fixed = if let Some(secs) = input.to_integer() {
        ChronoDateTime::from_timestamp(secs, 0)?.fixed_offset()
    } else if let Ok(dt) = ChronoDateTime::parse_from_rfc3339(text) {
        dt
    } else if let Some(naive) = [
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%d %H:%M:%S%.f",
    ]
    .iter()
    .find_map(|f| NaiveDateTime::parse_from_str(text, f).ok())
    {
        naive.and_utc().fixed_offset()
    } else if let Ok(day) = NaiveDate::parse_from_str(text, "%Y-%m-%d") {
        day.and_hms_opt(0, 0, 0)?.and_utc().fixed_offset()
    } else {
        return input.to_date_time();
    };
    // Liquid's own text parser compiles a regex per call; its serde form is a plain format.
    let text = fixed.format("%Y-%m-%d %H:%M:%S%.f %z").to_string();
    let de: serde::de::value::StrDeserializer<'_, serde::de::value::Error> =
        text.as_str().into_deserializer();
    DateTime::deserialize(de).ok()
}

/// `json`: the input serialized as JSON.
#[derive(Clone, ParseFilter, FilterReflection)]
#[filter(
    name = "json",
    description = "Serializes the input as JSON.",
    parsed(JsonFilter)
)]
pub(crate) struct Json;

#[derive(Debug, Default, Display_filter)]
#[name = "json"]
struct JsonFilter;

impl Filter for JsonFilter {
    fn evaluate(&self, input: &dyn ValueView, _runtime: &dyn Runtime) -> Result<Value> {
        let text = serde_json::to_string(&input.to_value())
            .map_err(|e| Error::with_msg(format!("Cannot serialize to JSON: {e}")))?;
        Ok(Value::scalar(text))
    }
}
