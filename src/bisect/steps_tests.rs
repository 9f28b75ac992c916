use super::*;

fn row(rep: u32, variant: &str, iteration: u32, error: Option<&str>) -> RunRow {
    RunRow {
        rep,
        variant: variant.into(),
        iteration,
        status: if error.is_some() {
            RepStatus::Failed
        } else {
            RepStatus::Ok
        },
        error: error.unwrap_or_default().into(),
        ..RunRow::sample()
    }
}

const HUNG: &str =
    "the program did not finish in 12 s (rep_timeout_s); its process group was killed";

#[test]
fn a_step_ends_at_its_commits_first_timeout_unless_retried() {
    let rows = vec![row(0, "good", 0, None), row(1, "step", 0, Some(HUNG))];
    let why = step_failing(&rows, false).unwrap();
    assert!(why.starts_with("timed out after 12 s (rep 1): "), "{why}");
    // Retried: one failed rep is not yet the end of the step, two are.
    assert_eq!(step_failing(&rows, true), None);
    let mut two = rows.clone();
    two.push(row(3, "step", 1, Some(HUNG)));
    assert!(step_failing(&two, true)
        .unwrap()
        .starts_with("2 failed reps"));
    // A timeout of an end is not the commit's.
    let end = vec![row(0, "good", 0, Some(HUNG)), row(1, "step", 0, None)];
    assert_eq!(step_failing(&end, false), None);
}

#[test]
fn a_commit_that_did_not_build_ends_its_step_at_once_and_one_that_ran_goes_on() {
    // At its warm-up, before any measured rep.
    let mut unbuilt = vec![row(
        1,
        "step",
        0,
        Some("build failed (exit status: 1); log …"),
    )];
    unbuilt[0].warmup = true;
    assert!(step_failing(&unbuilt, false)
        .unwrap()
        .contains("did not build"));
    let flaky = vec![
        row(1, "step", 0, Some("the program exited with exit status: 3")),
        row(4, "step", 1, None),
        row(7, "step", 2, Some("the program exited with exit status: 3")),
    ];
    assert_eq!(step_failing(&flaky, false), None);
    // Iterations complete when every variant ran in them, whatever their status.
    let rows = vec![
        row(0, "good", 0, None),
        row(1, "step", 0, Some("x")),
        row(2, "good", 1, None),
    ];
    assert_eq!(complete_iterations(&rows, &["good", "step"]), 1);
    assert_eq!(complete_iterations(&rows, &["good"]), 2);
}

#[test]
fn the_time_left_is_the_time_per_iteration_times_those_to_go() {
    let t = |ms| Duration::from_millis(ms);
    assert_eq!(
        time_left(t(4_000), 2, 5, 30),
        "; about 6 s left (3 more reps at this spread)"
    );
    assert_eq!(
        time_left(t(400), 4, 5, 30),
        "; under a second left (1 more rep at this spread)"
    );
    // Never past the cap, nothing once there.
    assert_eq!(
        time_left(t(1_000), 1, 100, 3),
        "; about 2 s left (2 more reps at this spread)"
    );
    assert_eq!(time_left(t(1_000), 3, 100, 3), "");
}
