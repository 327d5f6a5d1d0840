//! `daqtune nic` as text: per port its PCI function and driver, the drop and error counters
//! that rose between two reads, then every counter with its source.

use daqtune_engine::nic_view::NicView;
use daqtune_probe::net::counters::{describe_delta, losses, Delta};
use std::fmt::Write as _;

/// The text report.
pub fn text(v: &NicView) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "NIC counters ({}{})",
        if v.source == "live" {
            "live".to_string()
        } else {
            format!("recorded root {}", v.root)
        },
        v.interval_s
            .map(|i| format!(", two reads {i:.1} s apart"))
            .unwrap_or_default()
    );
    if v.ports.is_empty() {
        let _ = writeln!(s, "no network interface");
    }
    for p in &v.ports {
        let _ = writeln!(s);
        let mut head = p.ifname.clone();
        if let Some(pci) = &p.pci {
            let _ = write!(head, " ({pci}");
            if let Some(d) = &p.driver {
                let _ = write!(head, ", {d}");
            }
            head.push(')');
        }
        let _ = writeln!(s, "{head}");
        if let Some(rose) = &p.rose {
            let loss: Vec<&Delta> = losses(rose).collect();
            if loss.is_empty() {
                let _ = writeln!(s, "  no drop or error counter rose");
            }
            for d in loss {
                let _ = writeln!(s, "  ROSE {}", describe_delta(d));
            }
        }
        if p.counters.is_empty() {
            let _ = writeln!(s, "  no drop or error counted since boot");
        }
        let w = p.counters.iter().map(|c| c.name.len()).max().unwrap_or(0);
        for c in &p.counters {
            let _ = writeln!(s, "  {:<w$}  {:>14}  {}", c.name, c.value, c.source);
        }
        for u in &p.unavailable {
            let _ = writeln!(s, "  ({}: {})", u.source, u.reason);
        }
    }
    s
}
