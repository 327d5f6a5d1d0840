//! What the agreement tests (`tunables_agree.rs`: every fixture root under every built-in
//! profile; `tunables_prop.rs`: generated hosts under generated profiles) hold to one another on
//! a copied root: every check, the plan, and the plan applied as `daqtune apply --root ROOT
//! --yes` applies it.
#![allow(dead_code)]

use daqtune_engine::apply::Selection;
use daqtune_engine::context::Context;
use daqtune_engine::facts::Facts;
use daqtune_engine::plan::{Plan, PlanOptions};
use daqtune_engine::profile::LoadedProfile;
use daqtune_engine::tunables::{build_plan_with, run_checks, RunOptions};
use daqtune_engine::verdict::Verdict;
use daqtune_probe::Host;
use std::path::Path;

/// The binary the plan's units and rules run: the one `testroot::install_daqtune` installs.
pub const EXE: &str = "/usr/bin/daqtune";

/// Every check's verdicts on the root under `lp`, from facts read afresh.
pub fn checks(root: &Path, lp: &LoadedProfile) -> Vec<Verdict> {
    let host = Host::at(root).expect("root");
    let facts = Facts::new(&host);
    let ctx = Context::with_facts(&facts, lp);
    run_checks(&ctx, &RunOptions::default())
}

/// The plan of every planner on the root under `lp` (its units name the profile as
/// `profile_ref`), from facts read afresh.
pub fn plan(root: &Path, lp: &LoadedProfile, profile_ref: &str, allow_acs: bool) -> Plan {
    let host = Host::at(root).expect("root");
    let facts = Facts::new(&host);
    let opts = PlanOptions {
        exe: Some(EXE.into()),
        profile_ref: profile_ref.into(),
        allow_acs,
        ..Default::default()
    };
    build_plan_with(&facts, lp, &opts, None).expect("plan")
}

/// `daqtune apply --root ROOT --profile PROFILE --yes [--allow-acs]`: `Err` with what it
/// printed unless it exits 0.
pub fn apply(root: &Path, profile: &str, allow_acs: bool) -> Result<(), String> {
    let sel = Selection {
        allow_acs,
        ..Default::default()
    };
    match super::drive::try_apply(root, profile, &sel) {
        Ok((0, _)) => Ok(()),
        Ok((code, out)) => Err(format!("apply exited {code}:\n{out}")),
        Err(e) => Err(format!("apply refused: {e}")),
    }
}
