//! Time units for people: the one place that picks s / ms / µs / ns for a duration, used
//! by the diff's tables and by the charts' labels and axes.

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
}
