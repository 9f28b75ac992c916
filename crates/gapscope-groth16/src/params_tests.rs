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
    let made_by = o1.generator.clone().unwrap();
    assert!(
        made_by.starts_with("paramgen, fixed base cpu ("),
        "{made_by}"
    );
    assert_eq!(
        o1.generation.as_ref().unwrap().fixed_base,
        made_by["paramgen, fixed base ".len()..]
    );
    let (p2, o2) = load_or_generate(dir.path(), &c, &key, ParamGen::Cpu).unwrap();
    assert_eq!(o2.source, "loaded");
    assert_eq!(o2.generator.as_deref(), Some(made_by.as_str()));
    assert!(o2.generation.is_none());
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

#[test]
fn sidecars_without_a_generator_still_load_and_bellperson_stays_selectable() {
    let dir = tempfile::tempdir().unwrap();
    let c = CircuitInstance::new(CircuitKind::Chain, 5, Gadget::Lc, 0).unwrap();
    let key = ParamsKey::for_circuit(&c, "chain", 5).unwrap();
    let (p1, o1) = load_or_generate(dir.path(), &c, &key, ParamGen::Bellperson).unwrap();
    assert_eq!(o1.generator.as_deref(), Some(super::paramgen::BELLPERSON));
    assert!(o1.generation.is_none());
    // A sidecar written before the generator was recorded.
    let side = cache_stem(dir.path(), &key).with_extension("json");
    let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&side).unwrap()).unwrap();
    let obj = v.as_object_mut().unwrap();
    assert!(obj.remove("generator").is_some());
    assert!(!obj.contains_key("generation"));
    std::fs::write(&side, v.to_string()).unwrap();
    let (p2, o2) = load_or_generate(dir.path(), &c, &key, ParamGen::Cpu).unwrap();
    assert_eq!(o2.source, "loaded");
    assert_eq!(o2.generator, None);
    assert!(p1 == p2);
    // meta.json of older runs has no generator either.
    let old =
        serde_json::json!({"key": key, "path": "x.params", "source": "loaded", "elapsed_ms": 1});
    let o: ParamsOrigin = serde_json::from_value(old).unwrap();
    assert_eq!(o.generator, None);
    // The file's checksum is what digest() computes without writing.
    let bytes = std::fs::read(cache_stem(dir.path(), &key).with_extension("params")).unwrap();
    use sha2::Digest;
    let want: String = sha2::Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(digest(&p2), want);
}
