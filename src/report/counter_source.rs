//! The report's "Counter source" line: what a variant's counts really came from, said
//! as what the machine gave (perf events with or without a PMU), not as the mode asked.
//! A leaf: `sections` uses it.

/// Hardware counters a PMU gives; without them `counters = "hardware"` means the
/// software events alone.
const HARDWARE_COLUMNS: [&str; 3] = ["instructions", "branches", "cycles"];

/// What a variant's counts really came from, for the report's "Counter source" line:
/// meta.json's `counters` of the variant (`source`), with "hardware" said as what the
/// machine gave: perf events with or without a PMU.
pub fn counter_source(meta: &crate::store::Meta, source: &str) -> String {
    if source != "hardware" {
        return source.to_string();
    }
    let available = |c: &str| meta.counters.get(c).is_some_and(|a| a.available);
    let hw: Vec<&str> = HARDWARE_COLUMNS
        .iter()
        .copied()
        .filter(|c| available(c))
        .collect();
    let sw: Vec<&str> = (meta.counters.iter())
        .filter(|(k, a)| a.available && !HARDWARE_COLUMNS.contains(&k.as_str()))
        .map(|(k, _)| k.as_str())
        .collect();
    match (hw.is_empty(), sw.is_empty()) {
        (false, _) => format!("perf events, hardware ({}) and software", hw.join(", ")),
        (true, false) => format!(
            "perf events, software only ({}): no hardware counters on this machine (no PMU), \
             so instructions, branches and cycles are unavailable",
            sw.join(", ")
        ),
        (true, true) => "none: no perf event could be opened on this machine".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counters::Availability;

    fn meta(available: &[&str], absent: &[&str]) -> crate::store::Meta {
        let mut m: crate::store::Meta = serde_json::from_str(include_str!(
            "../../tests/fixtures/quickstart-cpu/meta.json"
        ))
        .expect("the fixture's meta.json");
        m.counters.clear();
        for (cs, ok) in [(available, true), (absent, false)] {
            for c in cs {
                m.counters.insert(
                    c.to_string(),
                    Availability {
                        available: ok,
                        reason: (!ok).then(|| "not supported".into()),
                    },
                );
            }
        }
        m
    }

    #[test]
    fn hardware_is_said_as_what_the_machine_gave() {
        let no_pmu = meta(
            &["task_clock_ns", "page_faults"],
            &["instructions", "branches", "cycles"],
        );
        let s = counter_source(&no_pmu, "hardware");
        assert!(
            s.contains("software only (page_faults, task_clock_ns)"),
            "{s}"
        );
        assert!(s.contains("no PMU"), "{s}");
        let pmu = meta(&["instructions", "cycles", "task_clock_ns"], &["branches"]);
        let s = counter_source(&pmu, "hardware");
        assert!(
            s.starts_with("perf events, hardware (instructions, cycles)"),
            "{s}"
        );
        assert_eq!(
            counter_source(&pmu, "emulated (callgrind 3.19)"),
            "emulated (callgrind 3.19)"
        );
        assert!(counter_source(&meta(&[], &["cycles"]), "hardware").starts_with("none"));
    }
}
