//! Compile proto/omr/v1/*.proto with the vendored protoc (no system protoc needed).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protoc = protoc_bin_vendored::protoc_bin_path()?;
    // SAFETY-free: build scripts are single-threaded; set PROTOC for prost-build.
    std::env::set_var("PROTOC", protoc);
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    println!("cargo:rerun-if-changed=../../proto");
    tonic_prost_build::configure()
        .file_descriptor_set_path(out.join("omr_descriptor.bin"))
        .compile_protos(&["../../proto/omr/v1/detector.proto"], &["../../proto"])?;
    Ok(())
}
