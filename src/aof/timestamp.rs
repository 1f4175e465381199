//! ISO 8601 UTC timestamps as AOF/1 writes them: strict `Z`-suffixed parsing, millisecond output.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use time::{Date, Duration, Month, OffsetDateTime, PrimitiveDateTime, Time};

/// Why a string is not an AOF/1 timestamp.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("must be an ISO 8601 UTC datetime such as 2026-02-09T21:00:00.000Z, got {0:?}")]
pub struct TimestampError(pub String);

/// A point in time, always UTC, rendered as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(OffsetDateTime);

impl Timestamp {
    /// Parses `YYYY-MM-DDTHH:MM:SS[.fraction]Z`; offsets other than `Z` are refused.
    pub fn parse(text: &str) -> Result<Self, TimestampError> {
        let fail = || TimestampError(text.to_owned());
        let bytes = text.as_bytes();
        if bytes.len() < 20 || bytes.last() != Some(&b'Z') {
            return Err(fail());
        }
        let digits = |range: std::ops::Range<usize>| -> Option<u32> {
            let part = text.get(range)?;
            if part.bytes().all(|b| b.is_ascii_digit()) {
                part.parse().ok()
            } else {
                None
            }
        };
        let separators = [(4, b'-'), (7, b'-'), (10, b'T'), (13, b':'), (16, b':')];
        if separators.iter().any(|&(index, byte)| bytes[index] != byte) {
            return Err(fail());
        }
        let year = digits(0..4).ok_or_else(fail)?;
        let month = digits(5..7).ok_or_else(fail)?;
        let day = digits(8..10).ok_or_else(fail)?;
        let hour = digits(11..13).ok_or_else(fail)?;
        let minute = digits(14..16).ok_or_else(fail)?;
        let second = digits(17..19).ok_or_else(fail)?;
        let rest = &text[19..text.len() - 1];
        let nanos = if rest.is_empty() {
            0
        } else {
            let fraction = rest.strip_prefix('.').ok_or_else(fail)?;
            if fraction.is_empty() || !fraction.bytes().all(|b| b.is_ascii_digit()) {
                return Err(fail());
            }
            let mut padded: String = fraction.chars().take(9).collect();
            while padded.len() < 9 {
                padded.push('0');
            }
            padded.parse::<u32>().map_err(|_| fail())?
        };
        let month = u8::try_from(month)
            .ok()
            .and_then(|m| Month::try_from(m).ok())
            .ok_or_else(fail)?;
        let year = i32::try_from(year).map_err(|_| fail())?;
        let day = u8::try_from(day).map_err(|_| fail())?;
        let date = Date::from_calendar_date(year, month, day).map_err(|_| fail())?;
        let to_u8 = |value: u32| u8::try_from(value).map_err(|_| fail());
        let time = Time::from_hms_nano(to_u8(hour)?, to_u8(minute)?, to_u8(second)?, nanos)
            .map_err(|_| fail())?;
        Ok(Self(PrimitiveDateTime::new(date, time).assume_utc()))
    }

    /// The timestamp for milliseconds since the Unix epoch, if representable.
    pub fn from_unix_ms(ms: i64) -> Option<Self> {
        OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
            .ok()
            .map(Self)
    }

    /// The current system time.
    pub fn now_utc() -> Self {
        Self(OffsetDateTime::now_utc())
    }

    /// Milliseconds since the Unix epoch.
    pub fn unix_ms(self) -> i64 {
        let ms = self.0.unix_timestamp_nanos() / 1_000_000;
        i64::try_from(ms).unwrap_or(i64::MAX)
    }

    /// This timestamp moved by `ms` milliseconds (saturating at the representable range).
    pub fn plus_ms(self, ms: i64) -> Self {
        self.0
            .checked_add(Duration::milliseconds(ms))
            .map(Self)
            .unwrap_or(self)
    }

    /// The UTC calendar date, `YYYY-MM-DD`.
    pub fn date_string(self) -> String {
        let date = self.0.date();
        format!(
            "{:04}-{:02}-{:02}",
            date.year(),
            u8::from(date.month()),
            date.day()
        )
    }

    /// The canonical rendering, `YYYY-MM-DDTHH:MM:SS.mmmZ`.
    pub fn to_iso(self) -> String {
        let time = self.0.time();
        format!(
            "{}T{:02}:{:02}:{:02}.{:03}Z",
            self.date_string(),
            time.hour(),
            time.minute(),
            time.second(),
            time.millisecond()
        )
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_iso())
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.to_iso())
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Self::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_renders_milliseconds() {
        let ts = Timestamp::parse("2026-02-09T21:00:00Z").expect("valid");
        assert_eq!(ts.to_iso(), "2026-02-09T21:00:00.000Z");
        let ts = Timestamp::parse("2026-02-09T21:00:00.123456Z").expect("valid");
        assert_eq!(ts.to_iso(), "2026-02-09T21:00:00.123Z");
        assert_eq!(ts.plus_ms(1000).to_iso(), "2026-02-09T21:00:01.123Z");
    }

    #[test]
    fn refuses_offsets_words_and_impossible_dates() {
        for text in [
            "not-a-timestamp",
            "tomorrow",
            "2026-02-09T21:00:00+01:00",
            "2026-02-09T21:00:00",
            "2026-02-30T21:00:00.000Z",
            "2026-02-09 21:00:00.000Z",
            "2026-02-09T21:00:00.Z",
            "2026-02-09T24:00:00.000Z",
        ] {
            assert!(Timestamp::parse(text).is_err(), "{text} must be refused");
        }
    }
}
