//! The detector's accuracy on the committed benchmark (evidence/history_detector/,
//! made by scripts/history_detector_benchmark.py from its seed): recall of planted
//! steps of at least 3× the noise ≥ 95% within 2 commits, and at most 1 false step
//! per 1,000 points. The script scores asv on the same series.

use std::io::Read;

use gapscope::history::detect::{detect, DetectOptions, StepVerdict};

#[derive(serde::Deserialize)]
struct Planted {
    index: usize,
    change: f64,
}

#[derive(serde::Deserialize)]
struct Series {
    cv: f64,
    planted: Vec<Planted>,
    points: Vec<Vec<f64>>,
}

#[derive(serde::Deserialize)]
struct File {
    series: Vec<Series>,
}

#[test]
fn the_benchmark_meets_its_goals() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/evidence/history_detector/series.json.gz"
    );
    let mut text = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(path).unwrap())
        .read_to_end(&mut text)
        .unwrap();
    let f: File = serde_json::from_slice(&text).unwrap();
    assert!(f.series.len() >= 200);
    let (mut points, mut false_steps, mut big, mut big_found) = (0, 0, 0, 0);
    for s in &f.series {
        points += s.points.len();
        let d = detect(&s.points, &DetectOptions::default());
        let found: Vec<usize> = d
            .steps
            .iter()
            .filter(|st| st.verdict != StepVerdict::Suspected)
            .map(|st| st.index)
            .collect();
        let mut matched = vec![false; s.planted.len()];
        for f in found {
            match (0..s.planted.len()).find(|&j| !matched[j] && s.planted[j].index.abs_diff(f) <= 2)
            {
                Some(j) => matched[j] = true,
                None => false_steps += 1,
            }
        }
        for (p, m) in s.planted.iter().zip(&matched) {
            if p.change.abs() >= 3.0 * s.cv {
                big += 1;
                big_found += *m as usize;
            }
        }
    }
    let recall = big_found as f64 / big as f64;
    let per_1000 = 1000.0 * false_steps as f64 / points as f64;
    assert!(recall >= 0.95, "recall {recall} ({big_found}/{big})");
    assert!(per_1000 <= 1.0, "{per_1000} false steps per 1000 points");
}
