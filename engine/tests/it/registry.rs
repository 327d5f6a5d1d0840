//! The registry is the one list of tunables: ids, aliases, docs pages, profile keys, the ids
//! `apply --only` takes and the ids a profile may name all come from it.

use daqtune_engine::commands::load_profile;
use daqtune_engine::profile;
use daqtune_engine::tunables::{self, apply_ids, find, REGISTRY};
use std::collections::BTreeSet;

#[test]
fn ids_and_aliases_are_unique_and_found() {
    let mut ids = BTreeSet::new();
    for t in REGISTRY {
        assert!(ids.insert(t.id), "{} twice", t.id);
        assert_eq!(find(t.id).map(|f| f.id), Some(t.id));
    }
    for t in REGISTRY {
        for a in t.aliases {
            // An alias never hides another tunable's id.
            assert!(
                !ids.contains(a) || *a == t.id,
                "{}: alias {a} is an id",
                t.id
            );
        }
    }
}

/// `apply --only` takes the ids of the tunables that plan, in the order plans run (the kernel
/// arguments first: their drop-in carries the others' boot settings).
#[test]
fn apply_ids_are_the_planners_in_plan_order() {
    assert_eq!(
        apply_ids(),
        [
            "kernel.cmdline",
            "cpu.governor",
            "cpu.idle",
            "hugepages",
            "pcie.mrrs",
            "pcie.acs",
            "nic.mtu",
            "gpu.peermem",
            "gpu.clocks",
            "net.sysctl",
            "kernel.thp",
            "kernel.numa-balancing",
            "kernel.watchdog",
            "kernel.timer-migration",
            "vm.stat-interval",
            "kernel.ksm",
            "nic.rings",
            "nic.coalesce",
            "nic.pause",
            "nic.offloads",
            "nic.channels",
            "irq.affinity",
        ]
    );
    let orders: BTreeSet<u8> = REGISTRY
        .iter()
        .filter_map(|t| t.planner.as_ref().map(|p| p.order))
        .collect();
    assert_eq!(orders.len(), apply_ids().len(), "plan orders are unique");
}

/// Profile keys the schema has and no tunable reads. `pcie.allow_acs` is parsed and never
/// read: `--allow-acs` is what allows ACS changes.
const UNREAD: &[&str] = &["pcie.allow_acs"];

/// Every key a tunable declares is in the profile schema, and every key of the tunables'
/// sections is declared by one (or listed as unread): a new key gets an owner.
#[test]
fn profile_keys_have_owners() {
    let lp = profile::load("generic-dgpu").expect("profile");
    let v = serde_yaml_ng::to_value(&lp.profile).expect("yaml");
    let mut schema = BTreeSet::new();
    for section in [
        "cpu",
        "hugepages",
        "pcie",
        "nic",
        "gpu",
        "sysctl",
        "kernel",
        "persist",
    ] {
        let m = v
            .get(section)
            .and_then(|s| s.as_mapping())
            .unwrap_or_else(|| panic!("section {section}"));
        for k in m.keys() {
            schema.insert(format!("{section}.{}", k.as_str().expect("key")));
        }
    }
    let mut claimed = BTreeSet::new();
    for t in REGISTRY {
        for k in t.profile_keys {
            assert!(
                schema.contains(*k),
                "{} declares `{k}`, not in the schema",
                t.id
            );
            claimed.insert(k.to_string());
        }
    }
    let orphans: Vec<&String> = schema
        .iter()
        .filter(|k| !claimed.contains(*k) && !UNREAD.contains(&k.as_str()))
        .collect();
    assert!(orphans.is_empty(), "keys no tunable declares: {orphans:?}");
}

/// The profile validator knows exactly the registry's ids: one it lacks is refused with the
/// line that names it; every registered id is accepted.
#[test]
fn profile_ids_are_the_registry() {
    let dir = tempfile::tempdir().expect("tmp");
    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "name: bad\nextends: generic-dgpu\nrequired:\n  - hugepages\n  - pcie.mrs\n",
    )
    .expect("write");
    let e = match load_profile(bad.to_str().expect("utf8")) {
        Ok(_) => panic!("an unknown id is refused"),
        Err(e) => e.to_string(),
    };
    assert!(e.contains("unknown check id `pcie.mrs`"), "{e}");
    assert!(e.contains(":5:"), "names the line: {e}");
    let all: Vec<String> = tunables::ids().map(|i| format!("  - {i}\n")).collect();
    let good = dir.path().join("good.yaml");
    std::fs::write(
        &good,
        format!(
            "name: good\nextends: generic-dgpu\nrequired:\n{}",
            all.concat()
        ),
    )
    .expect("write");
    load_profile(good.to_str().expect("utf8")).expect("every registered id is known");
}
