//! The schedule of a run: which variant each rep runs, warm-ups first, in the order the
//! experiment asks for. The runner walks it; a resumed run skips the reps already on disk.

use super::spec::Order;

/// One slot of the schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    pub rep: u32,
    pub variant: usize,
    pub iteration: u32,
    pub warmup: bool,
}

/// Warm-ups first (each variant, in turn), then measured reps, interleaved (ABAB…),
/// counterbalanced (ABBA…), in blocks of `block` reps (counterbalanced blocks) or
/// sequential (AA…BB…).
pub fn schedule(variants: usize, warmups: u32, reps: u32, order: Order, block: u32) -> Vec<Slot> {
    let mut out = Vec::new();
    let mut push = |variant, iteration, warmup| {
        let rep = out.len() as u32;
        out.push(Slot {
            rep,
            variant,
            iteration,
            warmup,
        })
    };
    for w in 0..warmups {
        for v in 0..variants {
            push(v, w, true);
        }
    }
    match order {
        Order::Interleaved => {
            for i in 0..reps {
                for v in 0..variants {
                    push(v, i, false);
                }
            }
        }
        // Counterbalanced is blocks of one rep.
        Order::Counterbalanced | Order::Blocks => {
            let block = if order == Order::Blocks {
                block.max(1)
            } else {
                1
            };
            for (b, first) in (0..reps).step_by(block as usize).enumerate() {
                for k in 0..variants {
                    let v = if b % 2 == 0 { k } else { variants - 1 - k };
                    for i in first..(first + block).min(reps) {
                        push(v, i, false);
                    }
                }
            }
        }
        Order::Sequential => {
            for v in 0..variants {
                for i in 0..reps {
                    push(v, i, false);
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order_of(order: Order) -> String {
        let slots = schedule(2, 1, 4, order, 3);
        assert_eq!(slots.len(), 10);
        assert!(slots.iter().enumerate().all(|(i, s)| s.rep == i as u32));
        assert!(slots[..2].iter().all(|s| s.warmup) && slots[2..].iter().all(|s| !s.warmup));
        // Every variant gets each iteration once.
        for v in 0..2 {
            let mut its: Vec<u32> = slots[2..]
                .iter()
                .filter(|s| s.variant == v)
                .map(|s| s.iteration)
                .collect();
            its.sort_unstable();
            assert_eq!(its, [0, 1, 2, 3]);
        }
        slots[2..]
            .iter()
            .map(|s| char::from(b'A' + s.variant as u8))
            .collect()
    }

    #[test]
    fn schedules_interleave_counterbalance_or_run_in_sequence() {
        assert_eq!(order_of(Order::Interleaved), "ABABABAB");
        assert_eq!(order_of(Order::Counterbalanced), "ABBAABBA");
        assert_eq!(order_of(Order::Sequential), "AAAABBBB");
        // Blocks of 3 (the last one shorter), counterbalanced.
        assert_eq!(order_of(Order::Blocks), "AAABBBBA");
        let three: String = schedule(3, 0, 2, Order::Counterbalanced, 1)
            .iter()
            .map(|s| char::from(b'A' + s.variant as u8))
            .collect();
        assert_eq!(three, "ABCCBA");
    }
}
