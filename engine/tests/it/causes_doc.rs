//! The likely-causes table (engine/src/model/causes.rs) names real checks, and docs/ci-gate.md gives
//! each entry's reason, in the table's order.

use daqtune_engine::causes::TABLE;
use daqtune_engine::tunables;

#[test]
fn every_cause_is_a_registered_check() {
    let ids: Vec<&str> = tunables::ids().collect();
    for r in TABLE {
        assert!(ids.contains(&r.id), "{} is not a check id", r.id);
    }
}

#[test]
fn docs_list_every_cause_in_rank_order() {
    let doc = include_str!("../../../docs/ci-gate.md");
    let section = doc
        .split("## Likely causes")
        .nth(1)
        .expect("docs/ci-gate.md has a `## Likely causes` section");
    let section = section.split("\n## ").next().unwrap_or(section);
    let mut last = 0;
    for (i, r) in TABLE.iter().enumerate() {
        let row = format!("| {} | `{}` |", i + 1, r.id);
        let at = section
            .find(&row)
            .unwrap_or_else(|| panic!("docs/ci-gate.md lacks the row `{row}`"));
        assert!(at >= last, "{} is out of order in docs/ci-gate.md", r.id);
        last = at;
    }
}
