//! The isolation arguments have one source (`context::boot::isolation`): what `kernel.cmdline`
//! expects is what its plan writes, so after `apply` the check finds its own words in the
//! drop-in and says `pending-reboot`. Two profiles the two former copies disagreed on: a data
//! core list not in the kernel's spelling (the plan wrote `isolcpus=9,10,11`, the check looked
//! for `isolcpus=9-11`), and an empty `irqaffinity` (the plan refused to write
//! `irqaffinity=`, the check expected no such argument).

use crate::common;

use common::drive::{apply, only, plan};
use common::testroot::*;
use common::{check_json_root, statuses};

fn igx() -> tempfile::TempDir {
    let d = igx_root_without_pci();
    add_igx_pci(d.path());
    install_daqtune(d.path());
    d
}

fn applied_then_pending(yaml: &str, words: &str) {
    let root = igx();
    let r = root.path();
    let profile = r.join("lab.yaml");
    std::fs::write(&profile, yaml).expect("profile");
    let profile = profile.to_str().expect("utf8");
    let p = plan(r, profile, &only(&["kernel.cmdline"]));
    assert!(p.contains(words), "{p}");
    let (code, out) = apply(r, profile, &only(&["kernel.cmdline"]));
    assert_eq!(code, 0, "{out}");
    let dropin =
        std::fs::read_to_string(r.join("etc/default/grub.d/99-daqtune.cfg")).expect("the drop-in");
    assert!(dropin.contains(words), "{dropin}");
    let rep = check_json_root(r, profile);
    assert_eq!(
        statuses(&rep, "kernel.cmdline"),
        ["pending-reboot"],
        "{rep:#}"
    );
}

#[test]
fn a_core_list_in_another_spelling_is_written_as_the_check_reads_it() {
    applied_then_pending(
        "name: lab\nextends: igx-orin\ncpu:\n  isolated: \"8,9,10,11\"\n",
        "isolcpus=8-11 irqaffinity=0-7 nohz_full=8-11 rcu_nocbs=8-11 rcu_nocb_poll",
    );
}

#[test]
fn an_empty_irqaffinity_is_left_out_by_check_and_plan() {
    applied_then_pending(
        "name: lab\nextends: igx-orin\ncpu:\n  irqaffinity: \"\"\n",
        "isolcpus=8-11 nohz_full=8-11 rcu_nocbs=8-11 rcu_nocb_poll",
    );
}
