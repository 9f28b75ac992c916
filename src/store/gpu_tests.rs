//! Telemetry and GPU-activity files of a run folder: written rep by rep, resumed like
//! spans.csv, and absent from older run folders without harm.

use super::*;

fn meta() -> Meta {
    Meta::sample()
}

fn gpu_rows(rep: u32) -> (Vec<TelemetryRow>, Vec<GpuActivityRow>) {
    let mut t = TelemetryRow::sample();
    t.rep = rep;
    t.variant = "a".into();
    t.source = "nvml".into();
    t.sm_util_pct = Some(97);
    t.power_mw = Some(312_000);
    let mut a = GpuActivityRow::sample();
    a.rep = rep;
    a.variant = "a".into();
    a.kind = "kernel".into();
    a.name = "_Z6kernelPf".into();
    a.start_ns = 10;
    a.end_ns = 30;
    a.duration_ns = 20;
    a.grid_x = Some(128);
    (vec![t.clone(), t], vec![a])
}

fn commit(w: &mut RunWriter, rep: u32) {
    let (t, a) = gpu_rows(rep);
    w.append_gpu(&t, &a).unwrap();
    let mut r = RunRow::sample();
    r.rep = rep;
    let mut s = SpanRow::sample();
    s.rep = rep;
    s.gpu_busy_ns = Some(20).into();
    s.process_cpu_ns = Some(30).into();
    w.append_rep(&r, &[s]).unwrap();
}

#[test]
fn telemetry_and_activity_round_trip() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("run");
    let mut w = RunWriter::create(&dir, &meta(), "").unwrap();
    commit(&mut w, 0);
    commit(&mut w, 1);
    let data = RunData::load(&dir).unwrap();
    let t = data.load_telemetry().unwrap();
    let a = data.load_gpu_activity().unwrap();
    assert_eq!(t.len(), 4);
    assert_eq!(t[0].sm_util_pct, Some(97));
    assert_eq!(t[0].pcie_tx_bytes_per_s, None);
    assert_eq!(a, vec![gpu_rows(0).1[0].clone(), gpu_rows(1).1[0].clone()]);
    assert_eq!(data.spans[1].gpu_busy_ns, Some(20));
    assert_eq!(data.spans[1].gpu_idle_ns(), Some(0));
}

#[test]
fn gpu_tables_go_on_in_parts_that_the_readers_and_a_resume_read_whole() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("run");
    let mut w = RunWriter::create(&dir, &meta(), "").unwrap();
    w.set_part_bytes(1);
    for rep in 0..3 {
        commit(&mut w, rep);
    }
    // Killed during rep 3: its GPU rows are in a fourth part, not its runs row.
    let (t, a) = gpu_rows(3);
    w.append_gpu(&t, &a).unwrap();
    drop(w);
    for table in [TELEMETRY, GPU_ACTIVITY] {
        for n in 1..=4 {
            assert!(present(&dir.join(part_name(table, n))), "{table} part {n}");
        }
    }
    let (mut w, rows) = RunWriter::open_resume(&dir).unwrap();
    assert_eq!(rows.len(), 3);
    let data = RunData::load(&dir).unwrap();
    let reps = |t: &[TelemetryRow]| t.iter().map(|r| r.rep).collect::<Vec<_>>();
    assert_eq!(reps(&data.load_telemetry().unwrap()), [0, 0, 1, 1, 2, 2]);
    commit(&mut w, 3);
    drop(w);
    let data = RunData::load(&dir).unwrap();
    assert_eq!(
        reps(&data.load_telemetry().unwrap()),
        [0, 0, 1, 1, 2, 2, 3, 3]
    );
    let a: Vec<u32> = data
        .load_gpu_activity()
        .unwrap()
        .iter()
        .map(|r| r.rep)
        .collect();
    assert_eq!(a, [0, 1, 2, 3]);
    // A part missing between two others is refused, naming it.
    std::fs::remove_file(dir.join(part_name(TELEMETRY, 2))).unwrap();
    let err = RunData::load(&dir).unwrap().load_telemetry().unwrap_err();
    assert!(err.to_string().contains("telemetry.2.csv"), "{err}");
}

#[test]
fn resume_drops_gpu_rows_of_an_unfinished_rep() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("run");
    let mut w = RunWriter::create(&dir, &meta(), "").unwrap();
    commit(&mut w, 0);
    // Killed during rep 1: its telemetry and activity are written, not its runs row.
    let (t, a) = gpu_rows(1);
    w.append_gpu(&t, &a).unwrap();
    drop(w);
    let (mut w, rows) = RunWriter::open_resume(&dir).unwrap();
    assert_eq!(rows.len(), 1);
    let data = RunData::load(&dir).unwrap();
    assert!(data.load_telemetry().unwrap().iter().all(|r| r.rep == 0));
    assert!(data.load_gpu_activity().unwrap().iter().all(|r| r.rep == 0));
    commit(&mut w, 1);
    let data = RunData::load(&dir).unwrap();
    assert_eq!(data.load_telemetry().unwrap().len(), 4);
    assert_eq!(data.load_gpu_activity().unwrap().len(), 2);
}

#[test]
fn run_folders_from_before_telemetry_still_load_and_resume() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("run");
    let mut w = RunWriter::create(&dir, &meta(), "").unwrap();
    commit(&mut w, 0);
    drop(w);
    std::fs::remove_file(dir.join(TELEMETRY)).unwrap();
    std::fs::remove_file(dir.join(GPU_ACTIVITY)).unwrap();
    // spans.csv as an older gapscope wrote it: no gpu_busy_ns column.
    let old = "rep,variant,span_id,parent_id,name,thread_id,thread_name,start_ns,end_ns,duration_ns,self_ns,\
instructions,branches,cycles,task_clock_ns,page_faults,context_switches,attrs\n\
0,a,1,,prove,7,main,0,10,10,10,,,,,,,{}\n";
    std::fs::write(dir.join(SPANS), old).unwrap();
    let data = RunData::load(&dir).unwrap();
    assert_eq!(data.spans[0].gpu_busy_ns, None);
    assert_eq!(data.spans[0].process_cpu_ns, None);
    assert!(data.load_telemetry().unwrap().is_empty());
    let (mut w, rows) = RunWriter::open_resume(&dir).unwrap();
    assert_eq!(rows.len(), 1);
    assert!(dir.join(TELEMETRY).exists() && dir.join(GPU_ACTIVITY).exists());
    commit(&mut w, 1);
    let data = RunData::load(&dir).unwrap();
    assert_eq!(data.spans.len(), 2);
    assert_eq!(
        data.spans[1].gpu_busy_ns,
        Some(20),
        "old spans.csv rewritten under the new header"
    );
    assert_eq!(data.spans[1].process_cpu_ns, Some(30));
    assert_eq!(data.spans[0].process_cpu_ns, None);
}
