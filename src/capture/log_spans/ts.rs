//! The times logs print, read as wall-clock instants (`ts` groups of
//! `[workload.log_spans]`): seconds since the Unix epoch, RFC 3339, the default formats
//! of common logging libraries, or a strftime-style `ts_format`, in a time zone (`tz`:
//! `local`, `UTC` or an offset). A time with no date takes the date that puts it nearest
//! the moment its line was read, so a rep that runs past midnight reads its lines right.
//!
//! Each reading carries its precision: a log library truncates its time to the digits it
//! prints, so a time printed with k decimals of a second lies within one unit of its last
//! digit after the printed value (one second when it prints whole seconds).

use chrono::format::{parse, Parsed, StrftimeItems};
use chrono::{DateTime, Duration, FixedOffset, Local, NaiveDate, NaiveDateTime, TimeZone, Utc};

/// The time zone of times printed without an offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tz {
    Local,
    Utc,
    Fixed(FixedOffset),
}

impl Tz {
    /// `"local"`, `"UTC"` (or `"Z"`), or an offset such as `"+02:00"`, `"-0530"`.
    pub fn parse(s: &str) -> Result<Tz, String> {
        let t = s.trim();
        if t.eq_ignore_ascii_case("local") {
            return Ok(Tz::Local);
        }
        if t.eq_ignore_ascii_case("utc") || t == "Z" {
            return Ok(Tz::Utc);
        }
        let mut p = Parsed::new();
        let ok = parse(&mut p, t, StrftimeItems::new("%:z")).is_ok()
            || parse(&mut p, t, StrftimeItems::new("%z")).is_ok();
        match p.offset().filter(|_| ok) {
            Some(secs) => FixedOffset::east_opt(secs)
                .map(Tz::Fixed)
                .ok_or_else(|| format!("tz {s:?}: offset out of range")),
            None => Err(format!(
                "tz {s:?} is not a time zone gapscope reads: write \"local\", \"UTC\" or an \
                 offset such as \"+02:00\""
            )),
        }
    }

    /// The instant `t` (a local time of this zone) stands for; in a DST fold, the earlier.
    fn instant(&self, t: NaiveDateTime) -> Option<DateTime<Utc>> {
        match self {
            Tz::Utc => Some(Utc.from_utc_datetime(&t)),
            Tz::Fixed(o) => o.from_local_datetime(&t).earliest().map(|d| d.to_utc()),
            Tz::Local => Local.from_local_datetime(&t).earliest().map(|d| d.to_utc()),
        }
    }

    /// The local date of the instant `wall_ns` in this zone.
    fn date_of(&self, wall_ns: i128) -> NaiveDate {
        let at = DateTime::<Utc>::from_timestamp_nanos(wall_ns.clamp(0, i64::MAX as i128) as i64);
        match self {
            Tz::Utc => at.date_naive(),
            Tz::Fixed(o) => at.with_timezone(o).date_naive(),
            Tz::Local => at.with_timezone(&Local).date_naive(),
        }
    }
}

/// Formats tried, in order, when an entry gives no `ts_format` (after epoch seconds and
/// RFC 3339). Each is what a common library prints by default, its time zone `tz`.
const DEFAULT_FORMATS: [&str; 5] = [
    // spdlog (`[%Y-%m-%d %H:%M:%S.%e]`), Python logging (a comma before the ms), log4j.
    "%Y-%m-%d %H:%M:%S%.f",
    // tracing-subscriber / env_logger with a space for the `T`.
    "%Y-%m-%dT%H:%M:%S%.f",
    // glog since 0.7: `I20240314 01:08:47.530000 …`.
    "%Y%m%d %H:%M:%S%.f",
    // glog before 0.7: `I0314 01:08:47.530000 …` (no year: taken from the rep).
    "%m%d %H:%M:%S%.f",
    // A time of day only.
    "%H:%M:%S%.f",
];

/// Reads `text` as a wall-clock instant in ns since the Unix epoch, with its precision in
/// ns. `format`: the entry's `ts_format`, else the defaults; `tz`: the zone of a time with
/// no offset; `near_wall_ns`: when its line was read, for a time with no (or a partial)
/// date.
pub fn parse_ts(
    text: &str,
    format: Option<&str>,
    tz: Tz,
    near_wall_ns: i128,
) -> Result<(i128, u64), String> {
    let s = text.trim();
    // Python's logging and log4j print a comma before the milliseconds.
    let dotted = s.replacen(',', ".", 1);
    let precision = precision_ns(&dotted);
    if let Some(f) = format {
        return with_format(&dotted, f, tz, near_wall_ns)
            .map(|t| (t, precision))
            .map_err(|why| format!("ts {text:?} does not read as ts_format {f:?}: {why}"));
    }
    if let Some(t) = epoch_seconds(&dotted) {
        return Ok((t, precision));
    }
    if let Some(t) = rfc3339(&dotted) {
        return Ok((t, precision));
    }
    for f in DEFAULT_FORMATS {
        if let Ok(t) = with_format(&dotted, f, tz, near_wall_ns) {
            return Ok((t, precision));
        }
    }
    Err(format!(
        "ts {text:?} is none of the times gapscope reads by default (seconds since the Unix \
         epoch, RFC 3339, `2024-03-14 01:08:47.530`, glog's `20240314 01:08:47.530000`, a \
         time of day `01:08:47.53`): give ts_format = '…' (strftime, e.g. '%d/%m/%Y \
         %H:%M:%S%.f') in the entry"
    ))
}

/// Seconds since the Unix epoch (`1714550400.123`), read digit by digit (an f64 would
/// lose the sub-microsecond digits of a present-day time).
fn epoch_seconds(s: &str) -> Option<i128> {
    let (whole, frac) = s.split_once('.').unwrap_or((s, ""));
    let digits = |d: &str| d.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() || whole.len() > 12 || !digits(whole) || !digits(frac) {
        return None;
    }
    let frac: String = frac.chars().chain(std::iter::repeat('0')).take(9).collect();
    Some(whole.parse::<i128>().ok()? * 1_000_000_000 + frac.parse::<i128>().ok()?)
}

/// RFC 3339, also with a space for the `T` (as tracing-subscriber's and log4rs's
/// defaults are close to it).
fn rfc3339(s: &str) -> Option<i128> {
    let t = DateTime::parse_from_rfc3339(s)
        .or_else(|_| DateTime::parse_from_rfc3339(&s.replacen(' ', "T", 1)))
        .ok()?;
    t.timestamp_nanos_opt().map(i128::from)
}

/// One unit of the last digit of the seconds' fraction: the printed time is that much
/// or less before the instant it stands for (libraries truncate). Whole seconds: 1 s.
pub fn precision_ns(s: &str) -> u64 {
    // The fraction follows the seconds: the last '.' followed by digits.
    let digits = s
        .rfind('.')
        .map(|i| s[i + 1..].chars().take_while(char::is_ascii_digit).count())
        .unwrap_or(0);
    10u64.pow(9u32.saturating_sub(digits.min(9) as u32))
}

/// `s` read with strftime `format`: with an offset when it prints one, else in `tz`; a
/// missing year, or a missing date, taken from the instant `near_wall_ns` (the date of
/// the three around it that puts the time nearest).
fn with_format(s: &str, format: &str, tz: Tz, near_wall_ns: i128) -> Result<i128, String> {
    let mut p = Parsed::new();
    parse(&mut p, s, StrftimeItems::new(format)).map_err(|e| e.to_string())?;
    let time = p.to_naive_time().map_err(|e| e.to_string())?;
    let tz = match p.offset() {
        Some(secs) => Tz::Fixed(FixedOffset::east_opt(secs).ok_or("offset out of range")?),
        None => tz,
    };
    let near = tz.date_of(near_wall_ns);
    let candidates: Vec<NaiveDate> = match (p.to_naive_date(), p.month(), p.day()) {
        (Ok(d), _, _) => vec![d],
        // A month and day without a year (glog before 0.7): this year, or the next or
        // last one across New Year.
        (Err(_), Some(m), Some(d)) => {
            use chrono::Datelike;
            (near.year() - 1..=near.year() + 1)
                .filter_map(|y| NaiveDate::from_ymd_opt(y, m, d))
                .collect()
        }
        (Err(_), None, None) if p.year().is_none() => {
            vec![near - Duration::days(1), near, near + Duration::days(1)]
        }
        (Err(e), _, _) => return Err(e.to_string()),
    };
    candidates
        .into_iter()
        .filter_map(|d| tz.instant(d.and_time(time)))
        .filter_map(|t| t.timestamp_nanos_opt().map(i128::from))
        .min_by_key(|t| (t - near_wall_ns).abs())
        .ok_or_else(|| "no such local time".to_string())
}

#[cfg(test)]
mod tests;
