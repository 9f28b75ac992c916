use super::paramgen::ParamGen;
use super::params::*;
use super::{CircuitInstance, CircuitKind, Gadget};

#[test]
fn cache_is_reused_and_corruption_or_mismatch_is_regenerated() {
    let dir = tempfile::tempdir().unwrap();
    let c = CircuitInstance::new(CircuitKind::Porep, 10, Gadget::Lc, 0).unwrap();
    let key = ParamsKey::for_circuit(&c, "porep", 10).unwrap();
    let (p1, o1) = load_or_generate(dir.path(), &c, &key, ParamGen::Cpu).unwrap();
    assert_eq!(o1.source, "generated");
    let (p2, o2) = load_or_generate(dir.path(), &c, &key, ParamGen::Cpu).unwrap();
    assert_eq!(o2.source, "loaded");
    assert_eq!(p1.vk, p2.vk);
    // meta.json names the file relative to the params dir, never the machine's path.
    let name = o2.path.file_name().unwrap().to_owned();
    assert!(o2.path.is_absolute() || o2.path.starts_with(dir.path()));
    assert_eq!(o2.for_meta(dir.path()).path.as_os_str(), name);
    let elsewhere = o2.for_meta(std::path::Path::new("/nonexistent"));
    assert_eq!(elsewhere.path.as_os_str(), name);
    assert_eq!(elsewhere.source, o2.source);
    // Flip one byte in the middle of the params file: detected, regenerated.
    let path = cache_stem(dir.path(), &key).with_extension("params");
    let mut bytes = std::fs::read(&path).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x5a;
    std::fs::write(&path, &bytes).unwrap();
    let (p3, o3) = load_or_generate(dir.path(), &c, &key, ParamGen::Cpu).unwrap();
    assert!(
        o3.source.starts_with("regenerated") && o3.source.contains("corrupt"),
        "{}",
        o3.source
    );
    assert_ne!(p3.vk, p1.vk, "fresh params have fresh toxic waste");
    // A truncated file too.
    let len = std::fs::metadata(&path).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(len / 3)
        .unwrap();
    let (_, o4) = load_or_generate(dir.path(), &c, &key, ParamGen::Cpu).unwrap();
    assert!(o4.source.starts_with("regenerated"), "{}", o4.source);
    // A sidecar made for another shape is not used.
    let mut other = key.clone();
    other.num_aux += 1;
    let side = cache_stem(dir.path(), &key).with_extension("json");
    let text = std::fs::read_to_string(&side).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["key"]["num_aux"] = serde_json::json!(other.num_aux);
    std::fs::write(&side, v.to_string()).unwrap();
    let (_, o5) = load_or_generate(dir.path(), &c, &key, ParamGen::Cpu).unwrap();
    assert!(o5.source.contains("another circuit shape"), "{}", o5.source);
}

#[test]
fn dimension_check_names_the_mismatch() {
    let c = CircuitInstance::new(CircuitKind::Porep, 10, Gadget::Lc, 0).unwrap();
    let key = ParamsKey::for_circuit(&c, "porep", 10).unwrap();
    let p = bellperson::groth16::generate_random_parameters::<blstrs::Bls12, _, _>(
        c.blank(),
        &mut rand::rngs::OsRng,
    )
    .unwrap();
    check_dimensions(&p, &key).unwrap();
    let mut k2 = key.clone();
    k2.num_inputs += 1;
    let e = check_dimensions(&p, &k2).unwrap_err();
    assert!(e.contains("vk.ic"), "{e}");
}
