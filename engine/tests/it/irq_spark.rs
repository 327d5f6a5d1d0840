//! `irq.affinity` on the DGX Spark shape: four CX-7 PFs bound to mlx5_core, two of them in PCI
//! domain 0002. The check once said "driver not bound" for each while `nic.driver` reported
//! all four on mlx5_core: it guessed the reason from an empty `msi_irqs/`, which the Spark root
//! did not record. The kernel lists a function's MSI/MSI-X vectors in `msi_irqs/` while a
//! driver holds them (Documentation/ABI/testing/sysfs-bus-pci), and mlx5_core always holds
//! MSI-X vectors, so the Spark fixture now has them (one per channel plus the async vector) and
//! the check words a missing list from the driver facts.

use crate::common;

use common::{copy_tree, evaluate, fixture};
use serde_json::Value;

fn irq_verdicts(rep: &Value) -> Vec<Value> {
    rep["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .filter(|c| c["id"] == "irq.affinity")
        .cloned()
        .collect()
}

#[test]
fn spark_pfs_in_both_domains_are_judged() {
    let (rep, _) = evaluate(
        &fixture("spark"),
        "dgx-spark",
        &["irq.affinity", "nic.driver"],
    );
    let vs = irq_verdicts(&rep);
    let ports: Vec<&str> = vs.iter().filter_map(|v| v["subject"].as_str()).collect();
    assert_eq!(vs.len(), 4, "{vs:#?}");
    for bdf in [
        "0000:01:00.0",
        "0000:01:00.1",
        "0002:01:00.0",
        "0002:01:00.1",
    ] {
        assert!(ports.iter().any(|p| p.starts_with(bdf)), "{bdf}: {ports:?}");
    }
    for v in &vs {
        assert_eq!(v["status"], "pass", "{v:#}");
        assert!(
            v["message"]
                .as_str()
                .is_some_and(|m| m.contains("21 interrupt(s) off the isolated CPUs 16-19")),
            "{v:#}"
        );
    }
}

#[test]
fn a_bound_driver_without_recorded_vectors_is_not_called_unbound() {
    let d = tempfile::tempdir().expect("tmp");
    copy_tree(&fixture("spark"), d.path());
    let mut removed = 0;
    for bdf in [
        "0000:01:00.0",
        "0000:01:00.1",
        "0002:01:00.0",
        "0002:01:00.1",
    ] {
        let dir = d
            .path()
            .join("sys/bus/pci/devices")
            .join(bdf)
            .join("msi_irqs");
        std::fs::remove_dir_all(&dir).expect("rm msi_irqs");
        removed += 1;
    }
    assert_eq!(removed, 4);
    let (rep, _) = evaluate(d.path(), "dgx-spark", &["irq.affinity", "nic.driver"]);
    let vs = irq_verdicts(&rep);
    assert_eq!(vs.len(), 4, "{vs:#?}");
    for v in &vs {
        assert_eq!(v["status"], "skip", "{v:#}");
        let m = v["message"].as_str().expect("message");
        assert!(!m.contains("not bound"), "{m}");
        assert!(m.contains("mlx5_core is bound"), "{m}");
        assert!(m.contains("msi_irqs is absent"), "{m}");
    }
    // nic.driver, from the same facts, says they are bound.
    let drivers: Vec<&Value> = rep["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .filter(|c| c["id"] == "nic.driver")
        .collect();
    assert!(
        drivers.iter().any(|v| v["message"]
            .as_str()
            .is_some_and(|m| m.contains("mlx5_core"))),
        "{drivers:#?}"
    );
}
