//! Build script of commbench-ofi: find libfabric with pkg-config, generate Rust bindings of its
//! headers with bindgen, and compile the C shims that give the headers' static-inline calls
//! real symbols (csrc/shim.c).

use std::env;
use std::path::PathBuf;

/// The oldest libfabric whose API this crate uses (FI_EP_RDM, FI_TAGGED, fi_tinject, the
/// 1.5 fi_cq_err_entry with err_data_size).
const MIN_VERSION: &str = "1.10";

fn main() {
    println!("cargo:rerun-if-changed=csrc/wrapper.h");
    println!("cargo:rerun-if-changed=csrc/shim.h");
    println!("cargo:rerun-if-changed=csrc/shim.c");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");

    let lib = match pkg_config::Config::new()
        .atleast_version(MIN_VERSION)
        .probe("libfabric")
    {
        Ok(lib) => lib,
        Err(e) => {
            eprintln!(
                "commbench-ofi needs libfabric {MIN_VERSION} or later with its headers and \
                 pkg-config file: on Debian or Ubuntu `apt-get install libfabric-dev \
                 libclang-dev pkg-config`, elsewhere set PKG_CONFIG_PATH to the directory of \
                 libfabric.pc.\n{e}"
            );
            std::process::exit(1);
        }
    };

    let mut cc = cc::Build::new();
    cc.file("csrc/shim.c").include("csrc").warnings(true);
    for p in &lib.include_paths {
        cc.include(p);
    }
    cc.compile("commbench_ofi_shim");

    let mut b = bindgen::Builder::default()
        .header("csrc/wrapper.h")
        .clang_arg("-Icsrc")
        .allowlist_function("fi_getinfo|fi_freeinfo|fi_fabric|fi_version|fi_strerror|fi_tostr")
        .allowlist_function("cb_fi_.*")
        .allowlist_type("fi_.*|fid_.*|fid")
        .allowlist_var("FI_.*")
        .derive_default(true)
        .derive_debug(true)
        .layout_tests(false)
        .prepend_enum_name(false)
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()));
    for p in &lib.include_paths {
        b = b.clang_arg(format!("-I{}", p.display()));
    }
    let bindings = b.generate().unwrap_or_else(|e| {
        eprintln!(
            "commbench-ofi: generating the libfabric bindings failed ({e}); bindgen needs \
             libclang: `apt-get install libclang-dev`"
        );
        std::process::exit(1);
    });
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    bindings
        .write_to_file(out.join("bindings.rs"))
        .expect("writing bindings.rs into OUT_DIR");
}
