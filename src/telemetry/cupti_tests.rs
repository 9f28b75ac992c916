//! Tests of [`super`] (cupti.rs), kept beside it.

use super::*;
use std::mem::MaybeUninit;

#[test]
fn kernel_records_decode() {
    let name = c"_Z4saxpyifPKfPf";
    // SAFETY: plain-old-data struct; zero is a valid bit pattern for every field.
    let mut k: sys::CUpti_ActivityKernel10 = unsafe { MaybeUninit::zeroed().assume_init() };
    k.kind = Kind::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    (k.start, k.end) = (1_000, 3_500);
    (k.deviceId, k.streamId, k.correlationId) = (1, 13, 77);
    (k.gridX, k.gridY, k.gridZ) = (1024, 2, 1);
    (k.blockX, k.blockY, k.blockZ) = (256, 1, 1);
    k.name = name.as_ptr();
    // SAFETY: a complete record with a valid name.
    let r = unsafe { decode(&k as *const _ as *const u8) }.unwrap();
    assert_eq!(r.kind, ActivityKind::Kernel);
    assert_eq!(r.name, "_Z4saxpyifPKfPf");
    assert_eq!(
        (r.start, r.end, r.device, r.stream, r.correlation_id),
        (1_000, 3_500, 1, 13, 77)
    );
    assert_eq!((r.grid, r.block), (Some([1024, 2, 1]), Some([256, 1, 1])));
    k.name = std::ptr::null();
    // SAFETY: as above, null name allowed.
    assert_eq!(
        unsafe { decode(&k as *const _ as *const u8) }.unwrap().name,
        "<unnamed kernel>"
    );
}

#[test]
fn copy_and_memset_records_decode_and_other_kinds_are_skipped() {
    // SAFETY: plain-old-data structs; zero is valid for every field.
    let mut m: sys::CUpti_ActivityMemcpy6 = unsafe { MaybeUninit::zeroed().assume_init() };
    m.kind = Kind::CUPTI_ACTIVITY_KIND_MEMCPY;
    (m.copyKind, m.bytes, m.start, m.end, m.streamId) = (2, 64 << 20, 10, 20, 7);
    // SAFETY: a complete record.
    let r = unsafe { decode(&m as *const _ as *const u8) }.unwrap();
    assert_eq!(
        (r.kind, r.name.as_str(), r.bytes, r.start, r.end, r.stream),
        (ActivityKind::Memcpy, "DtoH", Some(64 << 20), 10, 20, 7)
    );
    assert_eq!(r.grid, None);

    // SAFETY: as above.
    let mut s: sys::CUpti_ActivityMemset4 = unsafe { MaybeUninit::zeroed().assume_init() };
    s.kind = Kind::CUPTI_ACTIVITY_KIND_MEMSET;
    (s.bytes, s.start, s.end) = (4096, 5, 6);
    // SAFETY: a complete record.
    let r = unsafe { decode(&s as *const _ as *const u8) }.unwrap();
    assert_eq!(
        (r.kind, r.bytes, r.name.as_str()),
        (ActivityKind::Memset, Some(4096), "memset")
    );

    m.kind = Kind::CUPTI_ACTIVITY_KIND_DRIVER;
    // SAFETY: a complete record (of a kind that is skipped).
    assert!(unsafe { decode(&m as *const _ as *const u8) }.is_none());
}

fn marker(flags: sys::CUpti_ActivityFlag, id: u32, ts: u64) -> sys::CUpti_ActivityMarker2 {
    // SAFETY: plain-old-data struct; zero is valid for every field (null pointers,
    // enum values 0).
    let mut m: sys::CUpti_ActivityMarker2 = unsafe { MaybeUninit::zeroed().assume_init() };
    m.kind = Kind::CUPTI_ACTIVITY_KIND_MARKER;
    m.flags = flags;
    (m.id, m.timestamp) = (id, ts);
    m.objectKind = sys::CUpti_ActivityObjectKind::CUPTI_ACTIVITY_OBJECT_THREAD;
    m
}

/// Decodes a marker record after copying it to an odd address (as `decode` must
/// cope with any alignment).
fn decode_at_odd_address(m: &sys::CUpti_ActivityMarker2) -> Option<Marker> {
    let size = std::mem::size_of_val(m);
    let mut buf = vec![0u8; size + 1];
    // SAFETY: `buf` has room for the record at offset 1.
    unsafe {
        std::ptr::copy_nonoverlapping(m as *const _ as *const u8, buf.as_mut_ptr().add(1), size)
    };
    // SAFETY: a complete record at buf[1..]; its name (if any) outlives the call.
    let out = unsafe { decode_marker(buf.as_ptr().add(1)) };
    // SAFETY: as above; a marker is never a kernel, copy or memset.
    assert!(unsafe { decode(buf.as_ptr().add(1)) }.is_none());
    out
}

#[test]
fn marker_records_decode_and_other_kinds_are_not_markers() {
    use sys::CUpti_ActivityFlag as F;
    let name = c"gpu_prove";
    let mut start = marker(F::CUPTI_ACTIVITY_FLAG_MARKER_START, 42, 1_000);
    start.name = name.as_ptr();
    assert_eq!(
        decode_at_odd_address(&start),
        Some(Marker {
            id: 42,
            timestamp: 1_000,
            edge: MarkerEdge::Start("gpu_prove".into())
        })
    );
    start.name = std::ptr::null();
    assert_eq!(
        decode_at_odd_address(&start).unwrap().edge,
        MarkerEdge::Start("<unnamed range>".into())
    );
    // An END record has no name.
    let end = marker(F::CUPTI_ACTIVITY_FLAG_MARKER_END, 42, 2_500);
    assert_eq!(
        decode_at_odd_address(&end),
        Some(Marker {
            id: 42,
            timestamp: 2_500,
            edge: MarkerEdge::End
        })
    );
    // Instantaneous marks (flag bit 0) and synchronisation markers are not ranges.
    let mark = marker(F::CUPTI_ACTIVITY_FLAG_DEVICE_CONCURRENT_KERNELS, 7, 5);
    assert_eq!(decode_at_odd_address(&mark), None);
    let sync = marker(F::CUPTI_ACTIVITY_FLAG_MARKER_SYNC_ACQUIRE, 7, 5);
    assert_eq!(decode_at_odd_address(&sync), None);
    // A kernel record is not a marker.
    // SAFETY: plain-old-data struct.
    let mut k: sys::CUpti_ActivityKernel10 = unsafe { MaybeUninit::zeroed().assume_init() };
    k.kind = Kind::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    // SAFETY: a complete record.
    assert_eq!(unsafe { decode_marker(&k as *const _ as *const u8) }, None);
}

fn start(id: u32, name: &str, ts: u64) -> Marker {
    Marker {
        id,
        timestamp: ts,
        edge: MarkerEdge::Start(name.into()),
    }
}

fn end(id: u32, ts: u64) -> Marker {
    Marker {
        id,
        timestamp: ts,
        edge: MarkerEdge::End,
    }
}

#[test]
fn markers_pair_by_id_into_ranges_in_any_delivery_order() {
    // Nested ranges, their END records delivered (another buffer) before a START.
    let (ranges, unpaired) = pair_markers(vec![
        end(2, 300),
        start(1, "prove", 100),
        end(1, 900),
        start(2, "kernels", 200),
    ]);
    assert_eq!(unpaired, 0);
    let got: Vec<_> = ranges
        .iter()
        .map(|r| (r.kind, r.name.as_str(), r.start, r.end, r.correlation_id))
        .collect();
    assert_eq!(
        got,
        [
            (ActivityKind::NvtxRange, "prove", 100, 900, 1),
            (ActivityKind::NvtxRange, "kernels", 200, 300, 2),
        ]
    );
    assert_eq!((ranges[0].grid, ranges[0].bytes), (None, None));
}

#[test]
fn unpaired_markers_are_counted_not_ranges() {
    // Truncated at both ends: an END whose START came before collection, a START
    // whose END came after, a START repeated under one id, and one good range.
    let (ranges, unpaired) = pair_markers(vec![
        end(1, 50),
        start(2, "gpu_prove", 100),
        start(3, "h2d", 110),
        end(3, 120),
        start(4, "x", 130),
        start(4, "x", 140),
        end(4, 150),
    ]);
    let names: Vec<_> = ranges
        .iter()
        .map(|r| (r.name.as_str(), r.start, r.end))
        .collect();
    assert_eq!(names, [("h2d", 110, 120), ("x", 140, 150)]);
    assert_eq!(unpaired, 3);
    // Only ENDs, only STARTs, nothing at all: no ranges and no panic.
    assert_eq!(pair_markers(vec![end(9, 1), end(9, 2)]), (vec![], 2));
    assert_eq!(pair_markers(vec![start(9, "a", 1)]), (vec![], 1));
    assert_eq!(pair_markers(vec![]), (vec![], 0));
}

/// Without a GPU (or without libcupti) CUPTI says why; it never panics. With
/// `CUDA_PATH` pointing at a toolkit, this also covers loading libcupti by path.
#[test]
fn cupti_setup_reports_instead_of_panicking() {
    match Cupti::get() {
        Ok(c) => assert!(!c.library.is_empty()),
        Err(e) => assert!(
            e.starts_with("CUPTI library: ") || e.starts_with("cuptiSubscribe"),
            "{e}"
        ),
    }
}

#[test]
fn record_buffers_are_mapped_once_and_reused() {
    let a = POOL.take();
    assert!(!a.is_null());
    assert_eq!(a as usize % 4096, 0, "page-aligned");
    // The whole buffer is writable (CUPTI fills it to the end).
    // SAFETY: `a` is a fresh BUFFER_SIZE mapping.
    unsafe {
        a.write(1);
        a.add(BUFFER_SIZE - 1).write(2);
    }
    POOL.give(a);
    let b = POOL.take();
    assert_eq!(a, b, "a returned buffer is handed out again");
    let c = POOL.take();
    assert!(!c.is_null() && c != b);
    POOL.give(b);
    POOL.give(c);
}

#[test]
fn records_at_odd_addresses_decode() {
    // CUPTI packs records to 8 bytes; decode must not assume more than that, nor
    // even that: copy a record to an odd offset.
    // SAFETY: plain-old-data struct.
    let mut m: sys::CUpti_ActivityMemcpy6 = unsafe { MaybeUninit::zeroed().assume_init() };
    m.kind = Kind::CUPTI_ACTIVITY_KIND_MEMCPY;
    (m.copyKind, m.bytes, m.start, m.end) = (1, 12345, 100, 200);
    let size = std::mem::size_of_val(&m);
    let mut buf = vec![0u8; size + 1];
    // SAFETY: `buf` has room for the record at offset 1.
    unsafe {
        std::ptr::copy_nonoverlapping(&m as *const _ as *const u8, buf.as_mut_ptr().add(1), size)
    };
    // SAFETY: a complete record at buf[1..].
    let r = unsafe { decode(buf.as_ptr().add(1)) }.unwrap();
    assert_eq!(
        (r.name.as_str(), r.bytes, r.start, r.end),
        ("HtoD", Some(12345), 100, 200)
    );
}
