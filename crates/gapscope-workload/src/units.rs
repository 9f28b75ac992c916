//! Time units for people: the one place that picks s / ms / µs / ns for a duration and
//! formats it, used by the diff's tables, the reports and the charts' labels and axes.

/// A time unit: how many nanoseconds one of it is, and its suffix.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TimeUnit {
    pub ns: f64,
    pub suffix: &'static str,
}

const UNITS: [TimeUnit; 4] = [
    TimeUnit {
        ns: 1e9,
        suffix: "s",
    },
    TimeUnit {
        ns: 1e6,
        suffix: "ms",
    },
    TimeUnit {
        ns: 1e3,
        suffix: "µs",
    },
    TimeUnit {
        ns: 1.0,
        suffix: "ns",
    },
];

impl TimeUnit {
    /// The largest unit of which `ns` holds at least `min` (nanoseconds below that).
    fn largest(ns: f64, min: f64) -> Self {
        UNITS
            .into_iter()
            .find(|u| ns >= min * u.ns)
            .unwrap_or(UNITS[3])
    }

    /// The unit a single duration reads best in: the largest one it holds once ("12.3 ms").
    pub fn of(ns: f64) -> Self {
        Self::largest(ns.abs(), 1.0)
    }

    /// An axis unit: the largest one the axis's maximum holds twice, so that its ticks
    /// are not all below 2.
    pub fn for_max(max_ns: f64) -> Self {
        Self::largest(max_ns, 2.0)
    }

    pub fn value(&self, ns: f64) -> f64 {
        ns / self.ns
    }

    /// A tick label: no unit, as few decimals as the step needs.
    pub fn tick(&self, v: f64, step: f64) -> String {
        let decimals = if step >= 1.0 {
            0
        } else {
            (-step.log10()).ceil() as usize
        };
        format!("{v:.decimals$}")
    }
}

/// Nanoseconds with a unit chosen by magnitude and four significant digits, for tables
/// ("12.35 ms"; whole nanoseconds below a microsecond, the clock's resolution).
pub fn fmt_ns(ns: f64) -> String {
    let unit = TimeUnit::of(ns);
    if unit.ns == 1.0 {
        return format!("{ns:.0} ns");
    }
    format!("{} {}", sig4(unit.value(ns)), unit.suffix)
}

/// Nanoseconds with a unit chosen by magnitude and three significant digits, for chart
/// labels, where space is short ("12.3 ms"; "0" for zero).
pub fn fmt_ns_short(ns: f64) -> String {
    if ns == 0.0 {
        return "0".into();
    }
    let unit = TimeUnit::of(ns);
    let v = unit.value(ns);
    let av = v.abs();
    let decimals = if av >= 100.0 {
        0
    } else if av >= 10.0 {
        1
    } else {
        2
    };
    format!("{v:.decimals$} {}", unit.suffix)
}

/// A signed difference: "+1.20 ms (+3.4%)".
pub fn fmt_delta(delta_ns: f64, base_ns: f64) -> String {
    if delta_ns == 0.0 {
        return "±0".into();
    }
    let sign = if delta_ns >= 0.0 { "+" } else { "−" };
    let mut s = format!("{sign}{}", fmt_ns_short(delta_ns.abs()));
    if base_ns > 0.0 {
        let pct = 100.0 * delta_ns / base_ns;
        s.push_str(&format!(" ({sign}{:.1}%)", pct.abs()));
    }
    s
}

/// A value with four significant digits (at most three decimals).
pub fn sig4(v: f64) -> String {
    let a = v.abs();
    if a >= 100.0 {
        format!("{v:.1}")
    } else if a >= 10.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_by_magnitude() {
        let s = |u: TimeUnit| u.suffix;
        assert_eq!(s(TimeUnit::of(1.5e9)), "s");
        assert_eq!(s(TimeUnit::of(-1.5e9)), "s");
        assert_eq!(s(TimeUnit::of(999e6)), "ms");
        assert_eq!(s(TimeUnit::of(1e3)), "µs");
        assert_eq!(s(TimeUnit::of(999.0)), "ns");
        assert_eq!(s(TimeUnit::of(0.0)), "ns");
        assert_eq!(s(TimeUnit::for_max(1.5e9)), "ms");
        assert_eq!(s(TimeUnit::for_max(2e9)), "s");
        assert_eq!(s(TimeUnit::for_max(1.9e3)), "ns");
        assert_eq!(TimeUnit::of(2.5e6).value(2.5e6), 2.5);
    }

    #[test]
    fn table_and_label_precision() {
        assert_eq!(fmt_ns(12_345_678.0), "12.35 ms");
        assert_eq!(fmt_ns(950.4), "950 ns");
        assert_eq!(fmt_ns(-1.5e9), "-1.500 s");
        assert_eq!(fmt_ns_short(12_345_678.0), "12.3 ms");
        assert_eq!(fmt_ns_short(1_040_000_000.0), "1.04 s");
        assert_eq!(fmt_ns_short(950.0), "950 ns");
        assert_eq!(fmt_ns_short(0.0), "0");
        assert_eq!(fmt_delta(-2e6, 10e6), "−2.00 ms (−20.0%)");
        assert_eq!(fmt_delta(0.0, 10e6), "±0");
    }
}
