//! The one integration-test binary of this crate (issue 44): each former tests/NAME.rs is a
//! module here; `cargo test -p daqtune-engine --test it NAME::` runs one of them.

mod appconfig;
mod apply_acs;
mod apply_boot;
mod apply_cycle;
mod apply_faults;
mod apply_gpu_mock;
mod apply_live;
mod apply_persist;
mod bounds;
mod capture_needs;
mod causes_doc;
mod common;
mod detect;
mod error_types;
mod foundation;
mod gpu;
mod gpu_journal;
mod gpu_platform_verdicts;
mod gpu_view;
mod hardening_apply;
mod hostile_inputs;
mod hugepage_pools;
mod hugetlbfs_mount;
mod import_real_hosts;
mod irq_spark;
mod isolation_args;
mod kernel_latency;
mod layering;
mod libnuma;
mod nic_settings;
mod non_connectx;
mod owned_parts;
mod page_sizes;
mod partial_revert;
mod pci_checks;
mod peer_route;
mod physical_ports;
mod precedence;
mod reads_once;
mod real_host_verdicts;
mod recorded_gpu_runs;
mod registry;
mod renderers;
mod status;
mod topo_nvlink_recorded;
mod toy_tunable;
mod trial_boot;
mod tunables_agree;
mod tunables_prop;

// Shared with tune's tests (the red team's hostile hosts).
#[path = "../../../tests/support/redteam.rs"]
mod redteam;
