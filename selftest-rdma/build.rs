//! With feature `rdma`: bindgen bindings to the system libibverbs, plus a C file of wrappers for
//! the `static inline` verbs (ibv_post_send, ibv_post_recv, ibv_poll_cq, ...) that bindgen's
//! `wrap_static_fns` generates and the cc crate compiles. Without the feature: nothing.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=wrapper.h");
    #[cfg(feature = "rdma")]
    verbs::generate();
}

#[cfg(feature = "rdma")]
mod verbs {
    use std::env;
    use std::path::PathBuf;

    pub fn generate() {
        let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR is set by cargo"));
        let wrappers = out.join("verbs_static");
        let include = env::var("DAQTUNE_IBVERBS_INCLUDE").ok();
        // The target's ABI (c_char unsigned on aarch64, struct padding): clang parses the
        // headers for the target, and for a cross build finds its multiarch headers.
        let target = env::var("TARGET").expect("TARGET is set by cargo");
        println!("cargo:rerun-if-env-changed=DAQTUNE_IBVERBS_INCLUDE");
        let mut builder = bindgen::Builder::default()
            .header("wrapper.h")
            .clang_arg(format!("--target={target}"))
            .allowlist_function("ibv_.*")
            .allowlist_function("___ibv_query_port")
            .allowlist_function("_ibv_query_gid_ex")
            .allowlist_type("ibv_.*")
            .allowlist_var("IBV_.*")
            .derive_default(true)
            .layout_tests(false)
            .wrap_static_fns(true)
            .wrap_static_fns_path(&wrappers)
            .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()));
        if let Some(dir) = &include {
            builder = builder.clang_arg(format!("-I{dir}"));
        }
        let bindings = builder.generate().unwrap_or_else(|e| {
            panic!(
                "bindgen on <infiniband/verbs.h> failed ({e}); feature `rdma` needs rdma-core's \
                 headers and libclang (Debian: apt-get install libibverbs-dev libclang-dev)"
            )
        });
        bindings
            .write_to_file(out.join("verbs.rs"))
            .expect("write verbs.rs into OUT_DIR");

        let mut cc = cc::Build::new();
        cc.file(wrappers.with_extension("c"))
            .include(env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"))
            .warnings(false);
        if let Some(dir) = &include {
            cc.include(dir);
        }
        cc.compile("daqtune_verbs_static");
        println!("cargo:rustc-link-lib=ibverbs");
    }
}
