//! Times as logging libraries print them by default, each line written after the format
//! its library documents, read without a `ts_format`.

use regex::Regex;

use super::*;

/// 2024-03-14 01:08:47 UTC, in ns since the Unix epoch.
const AT: i128 = 1_710_378_527_000_000_000;
const MS: i128 = 1_000_000;

/// The `ts` group of `line` under `re`, read with the defaults in `tz`.
fn read(re: &str, line: &str, tz: Tz) -> (i128, u64) {
    let c = Regex::new(re).unwrap().captures(line).unwrap();
    parse_ts(c.name("ts").unwrap().as_str(), None, tz, AT).unwrap()
}

#[test]
fn env_logger_default() {
    // `[{timestamp} {level:<5} {module_path}] {args}`, timestamps to the second, UTC.
    let line = "[2024-03-14T01:08:47Z INFO  prover] GPU prove complete gpu_ms=35961";
    assert_eq!(
        read(r"^\[(?P<ts>\S+) ", line, Tz::Local),
        (AT, 1_000_000_000)
    );
    // With format_timestamp_millis.
    let line = "[2024-03-14T01:08:47.530Z INFO  prover] GPU prove complete gpu_ms=35961";
    assert_eq!(
        read(r"^\[(?P<ts>\S+) ", line, Tz::Local),
        (AT + 530 * MS, 1_000_000)
    );
}

#[test]
fn tracing_subscriber_fmt_default() {
    // fmt's Full format: RFC 3339 in UTC to the microsecond, two spaces, the level.
    let line = "2024-03-14T01:08:47.530123Z  INFO prover: GPU prove complete gpu_ms=35961";
    assert_eq!(
        read(r"^(?P<ts>\S+)\s+INFO", line, Tz::Local),
        (AT + 530_123_000, 1_000)
    );
}

#[test]
fn log4rs_default() {
    // `{d} {l} {t} - {m}{n}`: `{d}` is ISO 8601 in local time with its offset.
    let line = "2024-03-14T02:08:47.530123456+01:00 INFO prover - GPU prove time: 25.786289234s";
    assert_eq!(
        read(r"^(?P<ts>\S+) INFO", line, Tz::Utc),
        (AT + 530_123_456, 1)
    );
}

#[test]
fn spdlog_default() {
    // `[%Y-%m-%d %H:%M:%S.%e] [%n] [%l] %v`: local time to the millisecond, no offset.
    let line = "[2024-03-14 03:08:47.530] [console] [info] GPU prove complete gpu_ms=35961";
    let plus2 = Tz::Fixed(FixedOffset::east_opt(7200).unwrap());
    assert_eq!(
        read(r"^\[(?P<ts>[^\]]+)\]", line, plus2),
        (AT + 530 * MS, 1_000_000)
    );
    // In this host's own zone by default.
    let local = Local
        .with_ymd_and_hms(2024, 3, 14, 3, 8, 47)
        .earliest()
        .unwrap()
        .timestamp_nanos_opt()
        .unwrap() as i128;
    let c = Regex::new(r"^\[(?P<ts>[^\]]+)\]")
        .unwrap()
        .captures(line)
        .unwrap();
    let (t, _) = parse_ts(c.name("ts").unwrap().as_str(), None, Tz::Local, local).unwrap();
    assert_eq!(t, local + 530 * MS);
}

#[test]
fn glog_default() {
    // `Lyyyymmdd hh:mm:ss.uuuuuu threadid file:line] msg` (glog 0.7), local time.
    let re = r"^[IWEF](?P<ts>\d{8} [0-9:.]+) ";
    let line = "I20240314 01:08:47.530000 12345 prover.cc:42] GPU prove complete gpu_ms=35961";
    assert_eq!(read(re, line, Tz::Utc), (AT + 530 * MS, 1_000));
    // Before 0.7 the year was not printed: `Lmmdd hh:mm:ss.uuuuuu`; it is the rep's.
    let re = r"^[IWEF](?P<ts>\d{4} [0-9:.]+) ";
    let line = "I0314 01:08:47.530000 12345 prover.cc:42] GPU prove complete gpu_ms=35961";
    assert_eq!(read(re, line, Tz::Utc), (AT + 530 * MS, 1_000));
}

#[test]
fn the_incidents_own_formats_with_a_zone() {
    let utc = |s: &str, f: Option<&str>, tz: Tz| parse_ts(s, f, tz, AT).unwrap();
    let plus1 = Tz::parse("+01:00").unwrap();
    // Local time with no zone, to hundredths: known to 10 ms.
    assert_eq!(
        utc("2024-03-14 02:08:47.53", None, plus1),
        (AT + 530 * MS, 10_000_000)
    );
    assert_eq!(
        utc(
            "2024-03-14 01:08:47.53",
            Some("%Y-%m-%d %H:%M:%S%.f"),
            Tz::Utc
        ),
        (AT + 530 * MS, 10_000_000)
    );
    // A time of day: the date is the rep's.
    assert_eq!(
        utc("01:08:47.53", Some("%H:%M:%S%.f"), Tz::Utc),
        (AT + 530 * MS, 10_000_000)
    );
    assert_eq!(utc("01:08:47.53", None, Tz::Utc).0, AT + 530 * MS);
    // Python's logging prints a comma before the milliseconds.
    assert_eq!(
        utc("2024-03-14 01:08:47,530", None, Tz::Utc),
        (AT + 530 * MS, 1_000_000)
    );
    // Epoch seconds and RFC 3339 as before.
    assert_eq!(
        utc("1710378527.53", None, Tz::Utc),
        (AT + 530 * MS, 10_000_000)
    );
    assert_eq!(
        utc("2024-03-14T01:08:47.53Z", None, Tz::Local).0,
        AT + 530 * MS
    );
}

#[test]
fn a_time_of_day_past_midnight_takes_the_next_date() {
    // The line was read at 23:59:59.9 on the 14th; 00:00:00.2 is the 15th's.
    let near = AT + ((22 * 3600 + 51 * 60 + 12) * 1_000 + 900) as i128 * MS;
    let (t, _) = parse_ts("00:00:00.2", Some("%H:%M:%S%.f"), Tz::Utc, near).unwrap();
    let midnight = AT + ((22 * 3600 + 51 * 60 + 13) * 1_000) as i128 * MS;
    assert_eq!(t, midnight + 200 * MS);
    // And a line read just after midnight that says 23:59:59.8 is the day before's.
    let (t, _) = parse_ts("23:59:59.8", None, Tz::Utc, midnight + 300 * MS).unwrap();
    assert_eq!(t, midnight - 200 * MS);
}

#[test]
fn a_time_that_reads_as_nothing_says_to_give_a_format() {
    let e = parse_ts("14/03/2024 01:08", None, Tz::Utc, AT).unwrap_err();
    assert!(e.contains("ts_format"), "{e}");
    let e = parse_ts("01:08:47", Some("%Y-%m-%d %H:%M:%S"), Tz::Utc, AT).unwrap_err();
    assert!(e.contains("does not read as ts_format"), "{e}");
    assert!(Tz::parse("CET").is_err());
    assert_eq!(
        Tz::parse("-0530").unwrap(),
        Tz::Fixed(FixedOffset::west_opt(5 * 3600 + 1800).unwrap())
    );
}
