//! Which counters a variant's reps record: the experiment knob `counters`, at `[run]` or
//! per variant. `true` (or `"hardware"`): perf events on the span's thread (hardware
//! ones where a PMU exists, software ones always); `false`: none; `"emulated"`: exact
//! instructions and branches from valgrind's callgrind ([`super::emulated`]).

use serde::{Deserialize, Serialize};

/// The `counters` knob.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CounterMode {
    Off,
    /// perf_event_open on the span's thread.
    Hardware,
    /// The rep's worker runs under callgrind; spans get its exact counts.
    Emulated,
}

impl CounterMode {
    /// The knob's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            CounterMode::Off => "false",
            CounterMode::Hardware => "hardware",
            CounterMode::Emulated => "emulated",
        }
    }

    /// Whether spans read perf-event counters in this mode.
    pub fn perf_events(self) -> bool {
        self == CounterMode::Hardware
    }
}

impl Serialize for CounterMode {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            CounterMode::Off => s.serialize_bool(false),
            CounterMode::Hardware => s.serialize_bool(true),
            CounterMode::Emulated => s.serialize_str("emulated"),
        }
    }
}

impl<'de> Deserialize<'de> for CounterMode {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = CounterMode;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str(r#"true, false, "hardware" or "emulated""#)
            }
            fn visit_bool<E: serde::de::Error>(self, b: bool) -> Result<Self::Value, E> {
                Ok(if b {
                    CounterMode::Hardware
                } else {
                    CounterMode::Off
                })
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Self::Value, E> {
                match s {
                    "hardware" => Ok(CounterMode::Hardware),
                    "emulated" => Ok(CounterMode::Emulated),
                    _ => Err(E::invalid_value(serde::de::Unexpected::Str(s), &self)),
                }
            }
        }
        d.deserialize_any(V)
    }
}
