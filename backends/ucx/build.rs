//! Build script of commbench-ucx: find UCX with pkg-config and generate Rust bindings of its
//! UCP headers with bindgen. The headers' macros and static-inline calls that bindgen cannot
//! carry (`ucp_init`, `ucp_dt_make_contig`, `UCS_PTR_*`) are written again in `src/sys.rs`.

use std::env;
use std::path::PathBuf;

/// The oldest UCX whose API this crate uses: the `*_nbx` calls with `ucp_request_param_t`
/// and its `recv_info` (immediate completion of tagged receives), `ucp_worker_flush_nbx`,
/// `ucp_ep_close_nbx`.
const MIN_VERSION: &str = "1.10";

fn main() {
    println!("cargo:rerun-if-changed=csrc/wrapper.h");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");

    let lib = match pkg_config::Config::new()
        .atleast_version(MIN_VERSION)
        .probe("ucx")
    {
        Ok(lib) => lib,
        Err(e) => {
            eprintln!(
                "commbench-ucx needs UCX {MIN_VERSION} or later with its headers and \
                 pkg-config file: on Debian or Ubuntu `apt-get install libucx-dev libclang-dev \
                 pkg-config`, elsewhere set PKG_CONFIG_PATH to the directory of ucx.pc.\n{e}"
            );
            std::process::exit(1);
        }
    };

    let mut b = bindgen::Builder::default()
        .header("csrc/wrapper.h")
        .allowlist_function("ucp_.*|ucs_status_string")
        .allowlist_type("ucp_.*|ucs_status_t|ucs_status_ptr_t|ucs_thread_mode_t")
        .allowlist_var("UCP_.*|UCS_.*")
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
            "commbench-ucx: generating the UCX bindings failed ({e}); bindgen needs libclang: \
             `apt-get install libclang-dev`"
        );
        std::process::exit(1);
    });
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    bindings
        .write_to_file(out.join("bindings.rs"))
        .expect("writing bindings.rs into OUT_DIR");
}
