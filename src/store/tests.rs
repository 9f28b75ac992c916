use super::*;

fn meta() -> Meta {
    Meta::sample()
}

fn rep(rep: u32) -> (RunRow, Vec<SpanRow>) {
    let mut r = RunRow::sample();
    r.rep = rep;
    r.variant = "a".into();
    let mut s = SpanRow::sample();
    s.rep = rep;
    s.name = "prove".into();
    s.duration_ns = 1000 + rep as u64;
    s.page_faults = Some(3);
    (r, vec![s.clone(), s])
}

#[test]
fn reps_round_trip_and_a_new_run_never_overwrites() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("exp").join("run1");
    let mut w = RunWriter::create(&dir, &meta(), "name = \"t\"").unwrap();
    for i in 0..3 {
        let (r, s) = rep(i);
        w.append_rep(&r, &s).unwrap();
    }
    let data = RunData::load(&dir).unwrap();
    assert_eq!(data.runs.len(), 3);
    assert_eq!(data.spans.len(), 6);
    assert_eq!(data.spans[0].page_faults, Some(3));
    assert_eq!(data.spans[0].instructions, None);
    assert_eq!(data.meta, meta());
    assert!(RunWriter::create(&dir, &meta(), "").is_err());
}

#[test]
fn truncated_csv_names_file_and_line_and_resume_repairs_it() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("run");
    let mut w = RunWriter::create(&dir, &meta(), "").unwrap();
    for i in 0..2 {
        let (r, s) = rep(i);
        w.append_rep(&r, &s).unwrap();
    }
    drop(w);
    // Simulate a kill during rep 2: its spans written, half of a line, no runs row.
    let spans = dir.join(SPANS);
    let (_, s) = rep(2);
    let mut extra = csv::WriterBuilder::new()
        .has_headers(false)
        .from_writer(Vec::new());
    extra.serialize(&s[0]).unwrap();
    let line = extra.into_inner().unwrap();
    let mut bytes = std::fs::read(&spans).unwrap();
    bytes.extend_from_slice(&line);
    bytes.extend_from_slice(&line[..line.len() / 2]);
    std::fs::write(&spans, &bytes).unwrap();
    let e = RunData::load(&dir).unwrap_err().to_string();
    assert!(
        e.contains("spans.csv") && e.contains("line 7") && e.contains("truncated"),
        "{e}"
    );

    let (mut w, rows) = RunWriter::open_resume(&dir).unwrap();
    assert_eq!(rows.len(), 2);
    let (r, s) = rep(2);
    w.append_rep(&r, &s).unwrap();
    let data = RunData::load(&dir).unwrap();
    assert_eq!(data.runs.len(), 3);
    assert_eq!(
        data.spans.len(),
        6,
        "orphan spans of the killed rep were dropped"
    );
}

#[test]
fn a_folder_without_meta_is_explained() {
    let d = tempfile::tempdir().unwrap();
    let e = RunData::load(d.path()).unwrap_err().to_string();
    assert!(e.contains("not a gapscope run folder"), "{e}");
}
