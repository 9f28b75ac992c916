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
    s.page_faults = Some(3).into();
    // Two spans of one rep have two ids: the reader refuses an id twice.
    let mut child = s.clone();
    child.span_id = 1;
    (r, vec![s, child])
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
    // A killed run can be read as it is: the unterminated line is left out, and the
    // killed rep's whole rows belong to no committed rep.
    let data = RunData::load(&dir).unwrap();
    assert_eq!(data.runs.len(), 2);
    assert_eq!(data.spans.iter().filter(|s| s.rep < 2).count(), 4);

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

/// A run folder of `n` committed reps (two spans each), closed.
fn folder(n: u32) -> (tempfile::TempDir, std::path::PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("run");
    let mut w = RunWriter::create(&dir, &meta(), "name = \"t\"").unwrap();
    for i in 0..n {
        let (r, s) = rep(i);
        w.append_rep(&r, &s).unwrap();
    }
    (d, dir)
}

#[test]
fn a_run_folder_has_one_writer_at_a_time() {
    let (_d, dir) = folder(2);
    let (w, _) = RunWriter::open_resume(&dir).unwrap();
    let e = RunWriter::open_resume(&dir)
        .err()
        .expect("second writer refused");
    assert!(matches!(e, StoreError::Locked { .. }), "{e}");
    assert!(e.to_string().contains("another gapscope process"), "{e}");
    drop(w);
    // Released with the writer (and by the kernel when a process dies).
    RunWriter::open_resume(&dir).unwrap();
}

#[test]
fn a_committed_rep_whose_spans_were_cut_is_refused_by_readers_and_rerun_by_resume() {
    let (_d, dir) = folder(4);
    // Cut spans.csv mid-file: rep 3's spans and half of rep 2's are gone.
    let spans = dir.join(SPANS);
    let text = std::fs::read_to_string(&spans).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let cut = format!("{}\n{}", lines[..6].join("\n"), &lines[6][..5]);
    std::fs::write(&spans, cut).unwrap();
    let e = RunData::load(&dir).unwrap_err().to_string();
    assert!(
        e.contains("rep 2") && e.contains("1 of its 2 span rows") && e.contains("--resume"),
        "{e}"
    );
    let (w, rows) = RunWriter::open_resume(&dir).unwrap();
    assert_eq!(rows.iter().map(|r| r.rep).collect::<Vec<_>>(), vec![0, 1]);
    assert_eq!(w.resume_notes().len(), 2, "{:?}", w.resume_notes());
    assert!(
        w.resume_notes()[0].contains("rep 2"),
        "{:?}",
        w.resume_notes()
    );
    drop(w);
    let data = RunData::load(&dir).unwrap();
    assert_eq!(data.runs.len(), 2);
    assert_eq!(data.spans.len(), 4, "rep 2's remaining span row dropped");
}

#[test]
fn a_resume_of_an_emptied_runs_csv_writes_its_header_back() {
    let (_d, dir) = folder(2);
    std::fs::write(dir.join(RUNS), b"").unwrap();
    let (mut w, rows) = RunWriter::open_resume(&dir).unwrap();
    assert!(rows.is_empty());
    let (r, s) = rep(0);
    w.append_rep(&r, &s).unwrap();
    drop(w);
    let data = RunData::load(&dir).unwrap();
    assert_eq!(data.runs.len(), 1);
    assert_eq!(
        data.spans.len(),
        2,
        "spans of reps without a row were dropped"
    );
}

#[test]
fn a_rep_twice_in_runs_csv_is_refused_with_a_message_not_a_panic() {
    let (_d, dir) = folder(3);
    let runs = dir.join(RUNS);
    let text = std::fs::read_to_string(&runs).unwrap();
    let second = text.lines().nth(2).unwrap().to_string();
    std::fs::write(&runs, format!("{text}{second}\n")).unwrap();
    for e in [
        RunData::load(&dir).unwrap_err().to_string(),
        RunWriter::open_resume(&dir).err().unwrap().to_string(),
    ] {
        assert!(
            e.contains("rep 1 has two rows (lines 3 and 5)") && e.contains("Keep one row"),
            "{e}"
        );
    }
}

#[test]
fn outputs_inside_a_run_folder_are_refused() {
    let (_d, dir) = folder(1);
    for p in [
        dir.join(SPANS),
        dir.join("trace.json"),
        dir.join("sub").join("x"),
        dir.clone(),
    ] {
        let e = check_output_path(&p).unwrap_err().to_string();
        assert!(e.contains("inside the run folder"), "{e}");
    }
    check_output_path(&dir.parent().unwrap().join("trace.json")).unwrap();
}

#[test]
fn resume_compares_what_decides_the_remaining_reps_and_tolerates_new_fields() {
    let stored = meta();
    let mut fresh = meta();
    fresh.host.hostname = "elsewhere".into();
    fresh.command = vec!["gapscope".into()];
    assert!(resume_mismatch(&stored, &fresh).is_empty());
    fresh.workload.circuit.as_mut().unwrap().batch = 2;
    let d = resume_mismatch(&stored, &fresh);
    assert_eq!(
        d,
        vec!["batch: 1 in meta.json, 2 in experiment.toml".to_string()]
    );
    // Knobs: a changed value differs; a knob only today's version lists does not.
    let variant = |knobs: &[(&str, &str)]| VariantMeta {
        name: "a".into(),
        backend: "cpu".into(),
        knobs: knobs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        counters: None,
        scope: None,
        revision: None,
        patches: Vec::new(),
        patch_failed: None,
    };
    let (mut old, mut new) = (meta(), meta());
    old.variants = vec![variant(&[("drop", "sync")])];
    new.variants = vec![variant(&[("drop", "sync"), ("streams", "2")])];
    assert!(resume_mismatch(&old, &new).is_empty());
    new.variants = vec![variant(&[("drop", "async")])];
    assert_eq!(
        resume_mismatch(&old, &new),
        vec!["variant a drop: sync in meta.json, async in experiment.toml".to_string()]
    );
    // A meta.json with a field this version does not know still reads and resumes.
    let (_t, dir) = folder(1);
    let mut v = serde_json::to_value(meta()).unwrap();
    v["counter_source"] = serde_json::json!({"instructions": "emulated"});
    std::fs::write(dir.join(META), serde_json::to_vec(&v).unwrap()).unwrap();
    let m = read_meta(&dir).unwrap();
    assert!(resume_mismatch(&m, &meta()).is_empty());
    // The experiment copy's hash, where recorded, catches any other edit.
    let mut a = meta();
    a.experiment_sha256 = Some(experiment_sha256("x"));
    let mut b = meta();
    b.experiment_sha256 = Some(experiment_sha256("y"));
    assert!(
        resume_mismatch(&a, &b)[0].contains("edited"),
        "{:?}",
        resume_mismatch(&a, &b)
    );
}

/// meta.json as a folder of schema 1 has it: no `workload.kind`, no `phases`.
fn schema1_meta(workload: &str) -> String {
    let mut m = serde_json::to_value(meta()).unwrap();
    m["schema_version"] = 1.into();
    m.as_object_mut().unwrap().remove("phases");
    m["workload"] = serde_json::from_str(workload).unwrap();
    m.to_string()
}

fn read_meta_text(text: &str) -> Result<Meta, StoreError> {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("meta.json"), text).unwrap();
    read_meta(d.path())
}

#[test]
fn a_folder_of_schema_1_reads_as_the_provers_or_a_commands_with_the_provers_phases() {
    let prover = read_meta_text(&schema1_meta(
        r#"{"circuit": "porep", "log2_constraints": 12, "batch": 2, "backend": "cuda"}"#,
    ))
    .unwrap();
    assert_eq!(prover.workload.kind, None);
    assert_eq!(prover.workload.kind(), WorkloadKind::Groth16);
    assert_eq!(prover.workload.describe(), "porep 2^12 × 2 on cuda");
    assert_eq!(prover.phases, None);
    assert_eq!(prover.phases(), &PhaseSpec::groth16());
    // Written back, the workload is as it was read (a diff's JSON repeats it).
    assert_eq!(
        serde_json::to_value(&prover.workload).unwrap(),
        serde_json::json!({"circuit": "porep", "log2_constraints": 12, "batch": 2,
                           "backend": "cuda"})
    );
    let command = read_meta_text(&schema1_meta(
        r#"{"circuit": "command", "log2_constraints": 0, "batch": 1, "backend": "command"}"#,
    ))
    .unwrap();
    assert_eq!(command.workload.kind(), WorkloadKind::Command);
    assert_eq!(command.workload.describe(), "an external command");
    assert_eq!(command.phases().root, "prove");
    // Its circuit fields are no difference from a command's run of schema 2.
    assert_eq!(command.workload.field("circuit"), "");
    assert_eq!(command.workload.field("batch"), "");
    assert_eq!(prover.workload.field("batch"), "2");
}

#[test]
fn a_workload_without_its_circuit_or_bad_phases_are_refused_naming_the_field() {
    let mut m = serde_json::to_value(meta()).unwrap();
    m["workload"] = serde_json::json!({"kind": "groth16", "circuit": "porep"});
    let e = read_meta_text(&m.to_string()).unwrap_err().to_string();
    assert!(e.contains("workload of kind groth16 lacks circuit"), "{e}");
    m["workload"] = serde_json::json!({"kind": "replay"});
    let e = read_meta_text(&m.to_string()).unwrap_err().to_string();
    assert!(e.contains("unknown variant `replay`"), "{e}");
    m["workload"] = serde_json::json!({"kind": "import"});
    let imported = read_meta_text(&m.to_string()).unwrap();
    assert_eq!(imported.workload.kind(), WorkloadKind::Import);
    assert_eq!(imported.workload.describe(), "imported traces");
    m["workload"] = serde_json::json!({"kind": "command"});
    m["phases"] = serde_json::json!({"root": "program", "review": ["a", "a"]});
    let e = read_meta_text(&m.to_string()).unwrap_err().to_string();
    assert!(e.contains("phases.review names \"a\" twice"), "{e}");
    m["phases"] = serde_json::json!({"root": "program"});
    let ok = read_meta_text(&m.to_string()).unwrap();
    assert!(ok.workload.is_command() && ok.workload.circuit.is_none());
    assert_eq!(ok.phases().root, "program");
}

#[test]
fn runs_csv_of_schema_1_reads_verified_and_proofs_as_checked_and_outputs() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("run");
    let mut w = RunWriter::create(&dir, &meta(), "name = \"t\"").unwrap();
    let (mut r, s) = rep(0);
    r.outputs = 2;
    w.append_rep(&r, &s).unwrap();
    drop(w);
    let path = dir.join("runs.csv");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.starts_with("rep,variant,iteration,warmup,status,checked,outputs,"));
    let old = text.replacen(",checked,outputs,", ",verified,proofs,", 1);
    std::fs::write(&path, old).unwrap();
    let data = RunData::load(&dir).unwrap();
    assert!(data.runs[0].checked);
    assert_eq!(data.runs[0].outputs, 2);
}

/// `path` replaced by `path.gz` of two gzip members (split after its second line), as
/// `cat a.gz b.gz` makes.
fn gzip_in_two_members(path: &std::path::Path) {
    use std::io::Write;
    let text = std::fs::read(path).unwrap();
    let cut = text
        .iter()
        .enumerate()
        .filter(|(_, &b)| b == b'\n')
        .nth(1)
        .map_or(text.len(), |(i, _)| i + 1);
    let mut out = Vec::new();
    for part in [&text[..cut], &text[cut..]] {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(part).unwrap();
        out.extend(gz.finish().unwrap());
    }
    std::fs::write(gz_path(path), out).unwrap();
    std::fs::remove_file(path).unwrap();
}

fn snapshot(dir: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            (name, std::fs::read(e.path()).unwrap())
        })
        .collect();
    v.sort();
    v
}

#[test]
fn a_resume_keeps_gzipped_tables_as_they_are_until_it_adds_a_row_and_then_loses_none() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("run");
    let mut w = RunWriter::create(&dir, &meta(), "").unwrap();
    for i in 0..2 {
        let (r, s) = rep(i);
        w.append_rep(&r, &s).unwrap();
    }
    drop(w);
    for t in [RUNS, SPANS, TELEMETRY] {
        gzip_in_two_members(&dir.join(t));
    }
    let data = RunData::load(&dir).unwrap();
    assert_eq!(
        (data.runs.len(), data.spans.len()),
        (2, 4),
        "every member read"
    );
    let before = snapshot(&dir);
    let (w, rows) = RunWriter::open_resume(&dir).unwrap();
    assert_eq!(rows.len(), 2);
    assert!(w.resume_notes().is_empty(), "{:?}", w.resume_notes());
    drop(w);
    assert_eq!(
        snapshot(&dir),
        before,
        "a resume with nothing to add changed the folder"
    );
    let (mut w, _) = RunWriter::open_resume(&dir).unwrap();
    let (r, s) = rep(2);
    w.append_rep(&r, &s).unwrap();
    drop(w);
    let data = RunData::load(&dir).unwrap();
    assert_eq!((data.runs.len(), data.spans.len()), (3, 6));
    assert!(!present(&gz_path(&dir.join(SPANS))) && !present(&gz_path(&dir.join(RUNS))));
    // The table not written to stays gzipped.
    assert!(present(&gz_path(&dir.join(TELEMETRY))));
}

#[test]
fn a_resume_of_a_folder_whose_spans_table_is_missing_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("run");
    let mut w = RunWriter::create(&dir, &meta(), "").unwrap();
    let (r, s) = rep(0);
    w.append_rep(&r, &s).unwrap();
    drop(w);
    let runs = std::fs::read(dir.join(RUNS)).unwrap();
    std::fs::remove_file(dir.join(SPANS)).unwrap();
    let e = RunWriter::open_resume(&dir).err().expect("refused");
    assert!(e.to_string().contains("put the table back"), "{e}");
    assert_eq!(std::fs::read(dir.join(RUNS)).unwrap(), runs);
}

/// The reps whose rows each part of spans.csv holds, in order (plain parts).
fn reps_by_part(dir: &Path) -> Vec<Vec<u32>> {
    let mut out = Vec::new();
    for n in 1.. {
        let p = dir.join(part_name(SPANS, n));
        if !present(&p) {
            break;
        }
        let rows: Vec<SpanRow> = read_csv(&p).unwrap();
        let mut reps: Vec<u32> = rows.iter().map(|s| s.rep).collect();
        reps.dedup();
        out.push(reps);
    }
    out
}

/// Bytes of one rep's rows ([`rep`]) in spans.csv.
fn rep_bytes() -> u64 {
    let mut w = csv::WriterBuilder::new()
        .has_headers(false)
        .from_writer(Vec::new());
    for s in rep(0).1 {
        w.serialize(&s).unwrap();
    }
    w.into_inner().unwrap().len() as u64
}

fn header_bytes() -> u64 {
    header_of(&SpanRow::sample()).join(",").len() as u64 + 1
}

#[test]
fn spans_roll_into_parts_at_rep_boundaries_and_read_back_whole() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("run");
    let mut w = RunWriter::create(&dir, &meta(), "").unwrap();
    // Room for two reps and a half: the third starts the next part.
    w.set_part_bytes(header_bytes() + rep_bytes() * 5 / 2);
    for i in 0..5 {
        let (r, s) = rep(i);
        w.append_rep(&r, &s).unwrap();
        assert_eq!(w.take_capped(), None);
    }
    drop(w);
    assert_eq!(reps_by_part(&dir), [vec![0, 1], vec![2, 3], vec![4]]);
    let header = std::fs::read_to_string(dir.join(SPANS)).unwrap();
    let header = header.lines().next().unwrap();
    for n in 2..=3 {
        let text = std::fs::read_to_string(dir.join(part_name(SPANS, n))).unwrap();
        assert_eq!(text.lines().next(), Some(header), "part {n} has the header");
    }
    let data = RunData::load(&dir).unwrap();
    assert_eq!((data.runs.len(), data.spans.len()), (5, 10));
    let reps: Vec<u32> = data.spans.iter().map(|s| s.rep).collect();
    assert_eq!(reps, [0, 0, 1, 1, 2, 2, 3, 3, 4, 4], "parts read in order");
}

#[test]
fn a_rep_larger_than_a_part_gets_a_part_of_its_own_and_one_past_the_cap_keeps_no_spans() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("run");
    let mut w = RunWriter::create(&dir, &meta(), "").unwrap();
    w.set_table_cap(header_bytes() + rep_bytes() * 3 + 64);
    w.set_part_bytes(1);
    let big = |i: u32| {
        let (r, s) = rep(i);
        let more: Vec<SpanRow> = (0..2)
            .flat_map(|k| {
                s.iter().cloned().map(move |mut x| {
                    x.span_id += 10 * k + 10;
                    x.parent_id = None;
                    x
                })
            })
            .collect();
        (r, [s, more].concat())
    };
    for i in 0..2 {
        let (r, s) = rep(i);
        w.append_rep(&r, &s).unwrap();
    }
    // Three reps' worth of rows fit under the cap, in a part of their own.
    let (r, s) = big(2);
    w.append_rep(&r, &s).unwrap();
    assert_eq!(w.take_capped(), None);
    // Four do not: the rep keeps none and fails, saying why.
    let (r, mut s) = big(3);
    s.extend(rep(3).1.into_iter().map(|mut x| {
        x.span_id += 100;
        x
    }));
    w.append_rep(&r, &s).unwrap();
    let why = w.take_capped().expect("capped");
    assert!(why.contains("its 8 span rows take more than"), "{why}");
    let (r, s) = rep(4);
    w.append_rep(&r, &s).unwrap();
    drop(w);
    // Rep 3's part was cut back to its header, and rep 4 took it.
    assert_eq!(reps_by_part(&dir), [vec![0], vec![1], vec![2], vec![4]]);
    let data = RunData::load(&dir).unwrap();
    assert_eq!(data.spans.len(), 2 + 2 + 6 + 2);
    let failed = data.runs.iter().find(|r| r.rep == 3).unwrap();
    assert_eq!(failed.status, RepStatus::Failed);
    assert_eq!(failed.span_rows, Some(0));
    assert!(failed.error.contains(&why), "{}", failed.error);
}

#[test]
fn a_resume_appends_to_the_last_part_and_drops_a_killed_reps_rows_there() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("run");
    let mut w = RunWriter::create(&dir, &meta(), "").unwrap();
    w.set_part_bytes(header_bytes() + rep_bytes() * 2);
    for i in 0..3 {
        let (r, s) = rep(i);
        w.append_rep(&r, &s).unwrap();
    }
    drop(w);
    // A kill during rep 3: one of its rows and half of the next, no runs.csv row.
    let last = dir.join(part_name(SPANS, 2));
    let mut extra = csv::WriterBuilder::new()
        .has_headers(false)
        .from_writer(Vec::new());
    extra.serialize(&rep(3).1[0]).unwrap();
    let line = extra.into_inner().unwrap();
    let mut bytes = std::fs::read(&last).unwrap();
    bytes.extend_from_slice(&line);
    bytes.extend_from_slice(&line[..line.len() / 2]);
    std::fs::write(&last, bytes).unwrap();
    let (mut w, rows) = RunWriter::open_resume(&dir).unwrap();
    w.set_part_bytes(header_bytes() + rep_bytes() * 2);
    assert_eq!(rows.len(), 3);
    for i in 3..5 {
        let (r, s) = rep(i);
        w.append_rep(&r, &s).unwrap();
    }
    drop(w);
    assert_eq!(reps_by_part(&dir), [vec![0, 1], vec![2, 3], vec![4]]);
    let data = RunData::load(&dir).unwrap();
    assert_eq!((data.runs.len(), data.spans.len()), (5, 10));
}

/// A run folder `run` under `under` of three reps of two spans, a part each.
fn three_reps_in_three_parts(under: &Path) -> PathBuf {
    let dir = under.join("run");
    let mut w = RunWriter::create(&dir, &meta(), "").unwrap();
    w.set_part_bytes(1);
    for i in 0..3 {
        let (r, s) = rep(i);
        w.append_rep(&r, &s).unwrap();
    }
    dir
}

#[test]
fn gzipped_parts_are_read_and_a_complete_folder_resumes_as_a_no_op() {
    let d = tempfile::tempdir().unwrap();
    let dir = three_reps_in_three_parts(d.path());
    for n in 1..=3 {
        gzip_in_two_members(&dir.join(part_name(SPANS, n)));
    }
    let data = RunData::load(&dir).unwrap();
    assert_eq!(data.spans.len(), 6);
    let before = snapshot(&dir);
    let (w, rows) = RunWriter::open_resume(&dir).unwrap();
    assert_eq!(rows.len(), 3);
    drop(w);
    assert_eq!(snapshot(&dir), before, "a resume with nothing to add");
    let (mut w, _) = RunWriter::open_resume(&dir).unwrap();
    w.set_part_bytes(MAX_TABLE_BYTES);
    let (r, s) = rep(3);
    w.append_rep(&r, &s).unwrap();
    drop(w);
    // The last part was made plain and appended to; the others stay gzipped.
    assert!(present(&dir.join(part_name(SPANS, 3))));
    assert!(!present(&dir.join(part_name(SPANS, 4))));
    for n in 1..=2 {
        assert!(present(&gz_path(&dir.join(part_name(SPANS, n)))));
    }
    let data = RunData::load(&dir).unwrap();
    assert_eq!((data.runs.len(), data.spans.len()), (4, 8));
}

#[test]
fn a_missing_part_is_refused_and_a_bad_row_is_named_by_its_part_and_line() {
    let d = tempfile::tempdir().unwrap();
    let dir = three_reps_in_three_parts(d.path());
    let second = dir.join(part_name(SPANS, 2));
    let kept = std::fs::read(&second).unwrap();
    std::fs::remove_file(&second).unwrap();
    let e = RunData::load(&dir).unwrap_err().to_string();
    assert!(
        e.contains("spans.2.csv: missing") && e.contains("spans.3.csv"),
        "{e}"
    );
    assert!(RunWriter::open_resume(&dir).is_err());
    // Rep 1's second row given rep 1's first id.
    let text = String::from_utf8(kept).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    lines[2] = lines[2].replacen(",1,", ",0,", 1);
    std::fs::write(&second, lines.join("\n") + "\n").unwrap();
    let e = RunData::load(&dir).unwrap_err().to_string();
    assert!(
        e.contains("spans.2.csv, line 3") && e.contains("already the id of line 2"),
        "{e}"
    );
}

#[test]
fn a_table_read_a_buffer_at_a_time_keeps_complete_lines_and_names_a_bad_line() {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join(SPANS);
    let mut text = Vec::new();
    let mut w = csv::WriterBuilder::new().from_writer(&mut text);
    // Past the reader's buffer (1 MiB) and its look-back for the last line end (64 KiB).
    let n = 60_000;
    for i in 0..n {
        let mut s = SpanRow::sample();
        s.span_id = i;
        s.name = format!("span_{i}").into();
        w.serialize(&s).unwrap();
    }
    drop(w);
    assert!(text.len() > 2 << 20, "{}", text.len());
    // A line cut short, longer than the look-back: left out.
    let mut cut = text.clone();
    cut.extend(std::iter::repeat_n(b'x', 100 << 10));
    std::fs::write(&path, &cut).unwrap();
    let rows: Vec<SpanRow> = read_csv_complete(&path).unwrap();
    assert_eq!(rows.len(), n as usize);
    assert_eq!(rows[n as usize - 1].name, format!("span_{}", n - 1));
    // A bad field in the middle is named by its line, not taken for a cut last line.
    let at = text.len() / 2;
    let start = text[..at].iter().rposition(|&b| b == b'\n').unwrap() + 1;
    let mut bad = text.clone();
    bad[start] = b'x';
    std::fs::write(&path, &bad).unwrap();
    let line = bad[..start].iter().filter(|&&b| b == b'\n').count() + 1;
    let e = read_csv_complete::<SpanRow>(&path).unwrap_err().to_string();
    assert!(e.contains(&format!("line {line}")), "{e}");
    assert!(!e.contains("truncated"), "{e}");
    // The same in the last line: the file looks truncated.
    let last = text[..text.len() - 1]
        .iter()
        .rposition(|&b| b == b'\n')
        .unwrap()
        + 1;
    let mut bad = text.clone();
    bad[last] = b'x';
    std::fs::write(&path, &bad).unwrap();
    let e = read_csv_complete::<SpanRow>(&path).unwrap_err().to_string();
    assert!(e.contains("looks truncated"), "{e}");
}

#[test]
fn a_view_makes_each_memo_once_and_keys_it_by_name_and_type() {
    let view = RunView::new(crate::analysis::synthetic::SyntheticRun::new().build());
    let made = std::cell::Cell::new(0);
    let a = view.memo("k", || {
        made.set(made.get() + 1);
        vec![1u64, 2]
    });
    let b = view.memo("k", || {
        made.set(made.get() + 1);
        vec![9u64]
    });
    assert_eq!(made.get(), 1);
    assert!(std::sync::Arc::ptr_eq(&a, &b));
    // Another type under the same name is another value.
    assert_eq!(*view.memo("k", || "text".to_string()), "text");
    // A memo made while making another (the span order inside a chart's model).
    let outer = view.memo("outer", || view.memo("inner", || 3u32).to_string());
    assert_eq!(*outer, "3");
    // The span order and per-rep sums asked twice give the same answers.
    assert_eq!(view.span_order(), view.span_order());
    let name = view.span_order()[0].clone();
    let v = view.variants()[0].clone();
    assert_eq!(
        view.per_rep(&v, &name, SpanTime::Total),
        view.per_rep(&v, &name, SpanTime::Total)
    );
    assert!(!view.per_rep(&v, &name, SpanTime::Total).is_empty());
}

/// `path` replaced by the gzip of its text without the last line's line end (a table
/// gzipped after a kill cut its last row short).
fn gzip_without_last_line_end(path: &Path) {
    use std::io::Write;
    let text = std::fs::read(path).unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(text.strip_suffix(b"\n").unwrap()).unwrap();
    std::fs::write(gz_path(path), gz.finish().unwrap()).unwrap();
    std::fs::remove_file(path).unwrap();
}

#[test]
fn a_resume_counts_a_gzipped_tables_complete_lines_as_the_readers_do() {
    // A rep whose last span row has no line end, in a gzipped part: the readers hold
    // one of its two rows, so the resume runs it again (it once counted both, kept the
    // rep, and left a folder every reader refuses).
    let d = tempfile::tempdir().unwrap();
    let dir = three_reps_in_three_parts(d.path());
    gzip_without_last_line_end(&dir.join(part_name(SPANS, 2)));
    assert!(RunData::load(&dir).is_err(), "rep 1 holds one of its rows");
    let (w, rows) = RunWriter::open_resume(&dir).unwrap();
    assert_eq!(rows.iter().map(|r| r.rep).collect::<Vec<_>>(), [0, 2]);
    assert_eq!(w.resume_notes().len(), 1, "{:?}", w.resume_notes());
    assert!(
        w.resume_notes()[0].contains("rep 1"),
        "{:?}",
        w.resume_notes()
    );
    drop(w);
    let data = RunData::load(&dir).unwrap();
    assert_eq!((data.runs.len(), data.spans.len()), (2, 4));
    // A gzipped runs.csv whose last row has no line end: no rep of the readers, none of
    // the resume's (it once kept the rep, and the row was lost when the table was made
    // plain to take the next rep).
    let d = tempfile::tempdir().unwrap();
    let dir = three_reps_in_three_parts(d.path());
    gzip_without_last_line_end(&dir.join(RUNS));
    assert_eq!(RunData::load(&dir).unwrap().runs.len(), 2);
    let (mut w, rows) = RunWriter::open_resume(&dir).unwrap();
    assert_eq!(rows.iter().map(|r| r.rep).collect::<Vec<_>>(), [0, 1]);
    let (r, s) = rep(2);
    w.append_rep(&r, &s).unwrap();
    drop(w);
    let data = RunData::load(&dir).unwrap();
    assert_eq!(
        data.runs.iter().map(|r| r.rep).collect::<Vec<_>>(),
        [0, 1, 2]
    );
    assert_eq!(data.spans.len(), 6);
}
