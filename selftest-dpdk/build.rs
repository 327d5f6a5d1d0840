//! Build script: with the `dpdk` feature, generate bindings against the system libdpdk and
//! compile the C shim; without it, do nothing so the crate builds on hosts without libdpdk-dev.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    #[cfg(feature = "dpdk")]
    dpdk::build();
}

#[cfg(feature = "dpdk")]
mod dpdk {
    use std::env;
    use std::path::PathBuf;
    use std::process::Command;

    /// DPDK LTS releases these bindings are built and tested against. Others build with a
    /// warning: the wrapper only uses long-stable ethdev/mbuf/mempool API, but struct layouts
    /// are taken from the headers found here, so a mismatch cannot go unnoticed at run time.
    const SUPPORTED: &[&str] = &["22.11", "23.11"];

    /// The pkg-config of the target: `$PKG_CONFIG`, or for a cross build Debian's
    /// `<triple>-pkg-config` (pkgconf), which reads the target's multiarch .pc files
    /// (`libdpdk-dev:arm64`): the flags, the library and the headers bindgen reads must all be
    /// the target's, never the build machine's.
    fn pkg_config_tool() -> String {
        if let Ok(p) = env::var("PKG_CONFIG") {
            return p;
        }
        match cross_triple() {
            Some(t) => format!("{t}-pkg-config"),
            None => "pkg-config".into(),
        }
    }

    /// The GNU triple of the target when it is not the build machine (aarch64-linux-gnu for
    /// aarch64-unknown-linux-gnu), else None.
    fn cross_triple() -> Option<String> {
        let target = env::var("TARGET").ok()?;
        let host = env::var("HOST").ok()?;
        if target == host {
            return None;
        }
        let mut parts = target.split('-');
        let arch = parts.next()?;
        let os_abi: Vec<&str> = parts.skip(1).collect();
        Some(format!("{arch}-{}", os_abi.join("-")))
    }

    fn pkg_config(args: &[&str]) -> String {
        let tool = pkg_config_tool();
        let out = Command::new(&tool).args(args).output().unwrap_or_else(|e| {
            panic!("cannot run {tool} (install pkg-config, or pkgconf for a cross build): {e}")
        });
        if !out.status.success() {
            panic!(
                "pkg-config {} failed: {}\nthe `dpdk` feature needs libdpdk-dev (Debian 12: DPDK 22.11, Ubuntu 24.04: 23.11)",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    pub fn build() {
        println!("cargo:rerun-if-changed=csrc/shim.c");
        println!("cargo:rerun-if-changed=csrc/shim.h");
        println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
        println!("cargo:rerun-if-env-changed=PKG_CONFIG");

        let version = pkg_config(&["--modversion", "libdpdk"]);
        let major_minor: String = version.split('.').take(2).collect::<Vec<_>>().join(".");
        if !SUPPORTED.contains(&major_minor.as_str()) {
            println!(
                "cargo:warning=DPDK {version} is not one of the tested releases ({}); building anyway",
                SUPPORTED.join(", ")
            );
        }
        println!("cargo:rustc-env=DAQTUNE_DPDK_VERSION={version}");

        // Raw flags on purpose: the pkg-config crate drops `-include rte_config.h`, without which
        // the DPDK headers do not compile.
        let cflags_raw = pkg_config(&["--cflags", "libdpdk"]);
        let cflags: Vec<String> = cflags_raw.split_whitespace().map(str::to_string).collect();
        // -march from the pkg-config file only matters for DPDK's own inline vector code; clang
        // (bindgen) does not need it and may not know the name.
        let clang_flags: Vec<String> = cflags
            .iter()
            .filter(|f| !f.starts_with("-march") && !f.starts_with("-mcpu"))
            .cloned()
            .collect();

        let mut cc = cc::Build::new();
        cc.file("csrc/shim.c")
            .include("csrc")
            .opt_level(2)
            .warnings(false);
        for f in &cflags {
            cc.flag(f);
        }
        cc.compile("daqtune_dpdk_shim");

        let libs = pkg_config(&["--libs", "libdpdk"]);
        for tok in libs.split_whitespace() {
            if let Some(dir) = tok.strip_prefix("-L") {
                println!("cargo:rustc-link-search=native={dir}");
            } else if let Some(lib) = tok.strip_prefix("-l") {
                println!("cargo:rustc-link-lib=dylib={lib}");
            } else if tok.starts_with("-Wl,") {
                println!("cargo:rustc-link-arg={tok}");
            }
        }

        // clang parses the headers as the target's compiler would: `c_char` is unsigned on
        // aarch64, `long` and the padding of DPDK's structs follow the target ABI, and the
        // multiarch headers (/usr/include/aarch64-linux-gnu/dpdk) are the ones found.
        let target = env::var("TARGET").expect("TARGET is set by cargo");
        let bindings = bindgen::Builder::default()
            .header("csrc/shim.h")
            .clang_arg(format!("--target={target}"))
            .clang_args(&clang_flags)
            .clang_arg("-Icsrc")
            // Only what the wrapper uses: keeps bindgen's output (and the build) small.
            .allowlist_function("rte_eal_init")
            .allowlist_function("rte_eal_cleanup")
            .allowlist_function("rte_eal_remote_launch")
            .allowlist_function("rte_eal_wait_lcore")
            .allowlist_function("rte_get_tsc_hz")
            .allowlist_function("rte_socket_id")
            .allowlist_function("rte_strerror")
            .allowlist_function("rte_eth_dev_count_avail")
            .allowlist_function("rte_eth_dev_get_port_by_name")
            .allowlist_function("rte_eth_dev_info_get")
            .allowlist_function("rte_eth_dev_configure")
            .allowlist_function("rte_eth_rx_queue_setup")
            .allowlist_function("rte_eth_tx_queue_setup")
            .allowlist_function("rte_eth_dev_start")
            .allowlist_function("rte_eth_dev_stop")
            .allowlist_function("rte_eth_dev_close")
            .allowlist_function("rte_eth_dev_set_mtu")
            .allowlist_function("rte_eth_dev_socket_id")
            .allowlist_function("rte_eth_promiscuous_enable")
            .allowlist_function("rte_eth_macaddr_get")
            .allowlist_function("rte_eth_stats_get")
            .allowlist_function("rte_eth_stats_reset")
            .allowlist_function("rte_eth_xstats_get_names")
            .allowlist_function("rte_eth_xstats_get")
            .allowlist_function("rte_eth_xstats_reset")
            .allowlist_function("rte_eth_link_get_nowait")
            .allowlist_function("rte_pktmbuf_pool_create")
            .allowlist_function("rte_mempool_free")
            .allowlist_function("rte_mempool_avail_count")
            .allowlist_function("rte_pktmbuf_free_bulk")
            .allowlist_function("dqt_.*")
            .allowlist_var("RTE_ETH_MQ_.*")
            .allowlist_var("RTE_MBUF_DEFAULT_BUF_SIZE")
            .allowlist_var("RTE_PKTMBUF_HEADROOM")
            .allowlist_var("RTE_ETH_NAME_MAX_LEN")
            .allowlist_var("RTE_ETH_XSTATS_NAME_SIZE")
            // The wrapper never looks inside these; opaque keeps layouts out of the bindings.
            .opaque_type("rte_mbuf")
            .opaque_type("rte_mempool")
            .layout_tests(false)
            .derive_default(true)
            .generate_comments(false)
            .prepend_enum_name(false)
            .generate()
            .unwrap_or_else(|e| panic!("bindgen failed on the DPDK headers: {e}"));
        let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR is set by cargo"));
        bindings
            .write_to_file(out.join("dpdk_bindings.rs"))
            .unwrap_or_else(|e| panic!("cannot write bindings: {e}"));
    }
}
