//! `--find-max`: an RFC 2544-style throughput search for the unreliable modes (UDP, DPDK raw
//! frames): the highest paced rate whose loss stays within `--loss` and keeps doing so.
//!
//! The search itself ([`search`]) is a pure function over a closure "rate -> trial outcome", so
//! it is unit-tested with simulated loss curves; [`run`] drives it with a real [`Engine`].
//!
//! How it goes (docs/selftest.md, "Finding the loss-free maximum"):
//! 1. **Probe**: one unpaced trial. What the sender put on the path (`offered`) is the upper
//!    start bound (capped by the link's payload rate where a link speed is known); what
//!    arrived is the first guess. When the unpaced trial itself is loss-free, the sender is the
//!    limit and its delivered rate goes straight to confirmation.
//! 2. **Search**: binary search between the lower bound (the highest rate that passed, 0 at
//!    first) and the upper bound (the lowest that failed): first at the probe's delivered rate,
//!    then at the midpoint, until the bounds are within the resolution:
//!    `precision` percent of the upper start bound, at least [`MIN_RESOLUTION_GBPS`].
//! 3. **Claim and confirm**: the claim is the highest rate that passed, but at least a margin
//!    below the lowest rate that lost anything ([`Edge`]): the margin is the spread of what the
//!    receiver carried in the trials that lost (how far the loss edge moved while the search
//!    watched it), at least [`MIN_MARGIN_PCT`]. [`CONFIRM_RUNS`] trials in a row at the claim,
//!    each as long as the paced runs made at the result, must all pass. One that loses becomes
//!    the lowest lossy rate, the margin doubles (the noise was larger than measured), and the
//!    lower claim is confirmed again, until one holds or the trials run out.
//!
//! A trial passes when its loss is within the allowed percentage, no message failed its
//! checksum, and (paced trials) the sender offered at least [`MIN_OFFERED_FRACTION`] of the
//! rate asked: a rate the host could not even generate was not shown to be loss-free.

use crate::engine::{Engine, RunControl, RunSpec};
use crate::metrics::ThreadCpu;
use crate::report::EngineResult;

use std::collections::BTreeMap;
use std::time::Duration;

/// A paced trial must offer at least this share of the asked rate to count.
pub const MIN_OFFERED_FRACTION: f64 = 0.95;
/// The resolution never goes below this (Gb/s).
pub const MIN_RESOLUTION_GBPS: f64 = 0.001;
/// Trials at most by default (`--max-trials`), probe and confirmations included.
pub const MAX_TRIALS: usize = 40;
/// `--max-trials` range: room for the probe, one bisection step and a confirmation round at
/// the least; at most as many trials as an operator would wait for at the longest trial.
pub const MAX_TRIALS_RANGE: std::ops::RangeInclusive<usize> = (CONFIRM_RUNS + 2)..=200;

/// What is wrong with a trial cap `n`, in words, the setting named as its input spells it
/// (`--max-trials` on the command line, `max_trials` in the DPDK engine's JSON spec): the
/// socket command and the DPDK engine check it the same way.
pub fn max_trials_problem(setting: &str, n: usize) -> Option<String> {
    (!MAX_TRIALS_RANGE.contains(&n)).then(|| {
        format!(
            "{setting} must be within {}..={}: the probe, a bisection step and {CONFIRM_RUNS} \
             confirmations need {} at the least",
            MAX_TRIALS_RANGE.start(),
            MAX_TRIALS_RANGE.end(),
            MAX_TRIALS_RANGE.start()
        )
    })
}
/// Confirmation trials in a row that must all pass at the claim (k of k), each at least
/// [`CONFIRM_FLOORS`] x the trial floor, i.e. at least as long as the paced runs made at the
/// result (`bench/udp_vs_iperf3.sh`: 5 s). Three were not enough on the 16-core machine
/// (issue 43): a rate that passed three 6 s runs lost in 3 of 5 later 5 s runs. A rate that
/// loses one run in four passes five in a row with probability 0.24 (three: 0.42).
pub const CONFIRM_RUNS: usize = 5;
/// The claim stays at least this many percent below the lowest rate that lost anything, however
/// steady the search found the path: bisection ends up to one resolution (2 % by default) under
/// a lossy rate, and 2 % below it lost in later runs (issues 28 and 43).
pub const MIN_MARGIN_PCT: f64 = 5.0;
/// The margin taken from the measured spread is capped here; failed confirmations still double
/// it up to this cap, then keep lowering the claim by it.
pub const MAX_MARGIN_PCT: f64 = 50.0;
/// A trial lasts at least this many times the time the receive buffer takes to fill at the
/// trial's rate: shorter, and a receiver slower than the sender could end the trial with its
/// backlog still in the buffer and never show the loss.
pub const BUFFER_FILLS: f64 = 4.0;
/// A claim must survive a receiver stall this many times longer than the longest its
/// confirmation runs saw. At rate R a stall of t queues R*t; the peak backlog `f` (fraction of
/// the buffer B) says the longest stall was about f*B/R, so a rate R' survives a stall
/// `STALL_FACTOR` times that when R' * STALL_FACTOR * f*B/R <= B, i.e. R' <= R / (STALL_FACTOR * f).
/// The claim is capped there before it is confirmed, and steps down again when its
/// confirmations saw a longer stall.
pub const STALL_FACTOR: f64 = 3.0;
/// Longest trial (a very low rate with a large buffer would otherwise take minutes).
pub const MAX_TRIAL: Duration = Duration::from_secs(30);

pub use daqtune_report::findmax::{Limit, Phase, Summary, Trial};

/// What one trial measured, as the search needs it.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Outcome {
    /// Payload Gb/s the sender put on the path.
    pub offered_gbps: f64,
    /// Payload Gb/s received and verified.
    pub delivered_gbps: f64,
    pub loss_pct: f64,
    pub integrity_errors: u64,
    /// Highest receive-socket backlog the receiver saw during the trial, as a fraction of the
    /// socket's buffer (`None`: not measured). How close a trial came to losing: at rate R a
    /// receiver stall of t seconds queues R*t, and the buffer overflows at 1.0.
    pub peak_backlog: Option<f64>,
}

/// The search's settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Params {
    /// Loss allowed in a trial, percent (`--loss`, default 0: RFC 2544's zero loss).
    pub loss_pct: f64,
    /// Stopping precision, percent of the upper start bound (`--precision`).
    pub precision_pct: f64,
    /// Upper bound known from the hardware (a link's payload rate), Gb/s.
    pub link_gbps: Option<f64>,
    /// Trials at most, probe and confirmations included (`--max-trials`, default
    /// [`MAX_TRIALS`]): the search ends without a claim when the next step would pass it.
    pub max_trials: usize,
}

/// Whether a trial passes, and if not why (one line).
pub fn judge_trial(asked: Option<f64>, o: &Outcome, loss_pct: f64) -> (bool, Option<String>) {
    if o.integrity_errors > 0 {
        return (
            false,
            Some(format!("{} integrity error(s)", o.integrity_errors)),
        );
    }
    if o.offered_gbps <= 0.0 {
        return (false, Some("nothing was sent".into()));
    }
    if o.loss_pct > loss_pct {
        return (
            false,
            Some(format!("loss {:.4} % above {:.4} %", o.loss_pct, loss_pct)),
        );
    }
    if let Some(a) = asked {
        if o.offered_gbps < a * MIN_OFFERED_FRACTION {
            return (
                false,
                Some(format!(
                    "the sender offered only {:.3} of the {a:.3} Gb/s asked",
                    o.offered_gbps
                )),
            );
        }
    }
    (true, None)
}

/// One trial as the search saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub phase: Phase,
    /// Pacing asked for; `None` = unpaced.
    pub asked_gbps: Option<f64>,
    pub outcome: Outcome,
    pub passed: bool,
    pub why: Option<String>,
}

/// The search's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Search {
    pub steps: Vec<Step>,
    /// The confirmed rate (the asked rate of the passing confirmation trials).
    pub found_gbps: Option<f64>,
    /// Index in `steps` of the last passing confirmation trial.
    pub confirmed_step: Option<usize>,
    /// Upper start bound and resolution actually used, Gb/s.
    pub start_upper_gbps: f64,
    pub resolution_gbps: f64,
    /// The loss edge as the search left it (lowest lossy rate, spread, margin of the claim).
    pub edge: Edge,
    /// Claims that failed their confirmation before the one reported (or the last one tried).
    pub backoffs: usize,
    /// Highest receive backlog (fraction of the buffer) of the confirmation runs at the
    /// reported rate (`None`: not measured or nothing confirmed).
    pub peak_backlog: Option<f64>,
    /// Confirmation rounds that held but filled more than 1/[`STALL_FACTOR`] of the buffer, so
    /// the claim stepped down: (rate, peak backlog).
    pub backlog_steps: Vec<(f64, f64)>,
    /// Why the search ended, and what the rate means, in words.
    pub ended: String,
}

/// What the trials say about the loss edge, and the margin a claim keeps below it.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Edge {
    /// The lowest rate at which a trial failed (asked, or offered for the probe), Gb/s.
    pub lowest_lossy_gbps: Option<f64>,
    /// Lowest and highest rate delivered by the paced trials that lost messages: what the
    /// receiving side carried while it was losing, Gb/s. The unpaced probe is left out: a
    /// flooded receiver can carry less than a paced one (it spends itself on what it drops).
    pub carried_gbps: Option<(f64, f64)>,
    /// (highest - lowest) / highest of `carried_gbps`, percent (0 with fewer than two).
    pub spread_pct: f64,
    /// The rate the margin is taken below: the lower of `lowest_lossy_gbps` and the lowest
    /// rate carried (a trial that lost at 30 Gb/s while carrying 25 saw the path at 25; with
    /// `--loss` above 0, the rate at which carrying that much loses just the share allowed).
    pub base_gbps: Option<f64>,
    /// Margin the claim keeps below `base_gbps`, percent.
    pub margin_pct: f64,
}

impl Edge {
    /// Reads the edge from the steps so far; `backoffs` failed confirmations double the margin
    /// each (the path varied more than the search saw).
    pub fn of(steps: &[Step], loss_allowed_pct: f64, backoffs: usize) -> Edge {
        let lowest_lossy_gbps = steps
            .iter()
            .filter(|st| !st.passed)
            .map(|st| st.asked_gbps.unwrap_or(st.outcome.offered_gbps))
            .filter(|r| r.is_finite() && *r > 0.0)
            .reduce(f64::min);
        // Paced trials that failed for loss (not for a short sender or corruption): their
        // delivered rate is what the receiving side took at that moment.
        let carried: Vec<f64> = steps
            .iter()
            .filter(|st| st.asked_gbps.is_some())
            .filter(|st| st.outcome.loss_pct > loss_allowed_pct)
            .map(|st| st.outcome.delivered_gbps)
            .filter(|d| d.is_finite() && *d > 0.0)
            .collect();
        let carried_gbps = carried
            .iter()
            .fold(None, |acc: Option<(f64, f64)>, &d| match acc {
                None => Some((d, d)),
                Some((lo, hi)) => Some((lo.min(d), hi.max(d))),
            });
        let spread_pct = match carried_gbps {
            Some((lo, hi)) if carried.len() >= 2 && hi > 0.0 => (hi - lo) / hi * 100.0,
            _ => 0.0,
        };
        // Carrying c while losing, the rate that would have lost just the allowed share.
        let keep = (1.0 - loss_allowed_pct / 100.0).max(0.01);
        let base_gbps = match (lowest_lossy_gbps, carried_gbps) {
            (Some(l), Some((c, _))) => Some(l.min(c / keep)),
            (l, _) => l,
        };
        let doubled = MIN_MARGIN_PCT * 2f64.powi(backoffs.min(16) as i32);
        Edge {
            lowest_lossy_gbps,
            carried_gbps,
            spread_pct,
            base_gbps,
            margin_pct: spread_pct.max(doubled).min(MAX_MARGIN_PCT),
        }
    }

    /// The rate to claim: `passed` (the highest rate that passed), kept the margin below the
    /// base.
    pub fn claim(&self, passed: f64) -> f64 {
        match self.base_gbps {
            Some(b) => passed.min(b * (1.0 - self.margin_pct / 100.0)),
            None => passed,
        }
    }
}

/// Runs the search. `trial(asked, phase)` runs one trial (`asked` None = unpaced) and returns
/// its outcome, or `None` to stop (interrupted, engine error).
pub fn search<F>(p: &Params, mut trial: F) -> Search
where
    F: FnMut(Option<f64>, Phase) -> Option<Outcome>,
{
    let mut s = Search {
        steps: Vec::new(),
        found_gbps: None,
        confirmed_step: None,
        start_upper_gbps: 0.0,
        resolution_gbps: MIN_RESOLUTION_GBPS,
        edge: Edge::default(),
        backoffs: 0,
        peak_backlog: None,
        backlog_steps: Vec::new(),
        ended: String::new(),
    };
    // The one place a trial is run and judged.
    let mut run = |s: &mut Search, asked: Option<f64>, phase: Phase| -> Option<bool> {
        let o = trial(asked, phase)?;
        let (passed, why) = judge_trial(asked, &o, p.loss_pct);
        s.steps.push(Step {
            phase,
            asked_gbps: asked,
            outcome: o,
            passed,
            why,
        });
        Some(passed)
    };
    let Some(probe_passed) = run(&mut s, None, Phase::Probe) else {
        s.ended = "stopped during the unpaced probe".into();
        return s;
    };
    let probe = s.steps[0].outcome;
    let mut hi = probe.offered_gbps;
    if let Some(l) = p.link_gbps.filter(|l| *l > 0.0) {
        hi = hi.min(l);
    }
    // NaN (no rate at all) counts as nothing sent too.
    if hi.is_nan() || hi <= 0.0 {
        s.ended = "the unpaced probe sent nothing: no rate to search".into();
        return s;
    }
    s.start_upper_gbps = hi;
    let res = (hi * p.precision_pct / 100.0).max(MIN_RESOLUTION_GBPS);
    s.resolution_gbps = res;
    let mut lo = 0.0f64;
    let mut guess: Option<f64> = None;
    if probe_passed {
        // The path took everything the sender could offer: the sender is the limit.
        lo = probe.delivered_gbps.min(hi);
    } else if probe.delivered_gbps > res && probe.delivered_gbps < hi - res {
        guess = Some(probe.delivered_gbps);
    }
    while hi - lo > res {
        if s.steps.len() >= p.max_trials {
            s.ended = format!("stopped after {} trials, still searching", p.max_trials);
            return s;
        }
        let r = guess.take().unwrap_or((lo + hi) / 2.0);
        let Some(passed) = run(&mut s, Some(r), Phase::Search) else {
            s.ended = "stopped during the search".into();
            return s;
        };
        if passed {
            lo = r;
        } else {
            hi = r;
        }
    }
    if lo <= 0.0 {
        s.ended = format!("every rate tried lost messages, down to {hi:.3} Gb/s");
        return s;
    }
    let mut tried: Vec<(f64, String)> = Vec::new();
    loop {
        let edge = Edge::of(&s.steps, p.loss_pct, s.backoffs);
        s.edge = edge;
        let at = edge.claim(lo).min(stall_cap(&s.steps));
        // The resolution bounds the bisection, not the claim: a busy host's claim may go far
        // below it (issue 43: give a lower rate rather than none).
        if at < MIN_RESOLUTION_GBPS || at.is_nan() {
            s.ended = format!(
                "no claim held: {} confirmation round(s) failed ({}), and the next claim, \
                 {at:.4} Gb/s, is below {MIN_RESOLUTION_GBPS} Gb/s",
                s.backoffs,
                failed_claims(&tried)
            );
            return s;
        }
        if s.steps.len() + CONFIRM_RUNS > p.max_trials {
            s.ended = format!(
                "stopped after {} trials: not enough left to confirm {at:.3} Gb/s \
                 ({} confirmation round(s) failed: {})",
                s.steps.len(),
                s.backoffs,
                failed_claims(&tried)
            );
            return s;
        }
        let mut held = true;
        for _ in 0..CONFIRM_RUNS {
            let Some(passed) = run(&mut s, Some(at), Phase::Confirm) else {
                s.ended = "stopped during the confirmation".into();
                return s;
            };
            if !passed {
                held = false;
                break;
            }
        }
        if held {
            // A round that held only because no stall lasted long enough: the backlog says how
            // near it came. Not losing in 5 runs is no promise for the next 5 (issue 43).
            let peak = s.steps[s.steps.len() - CONFIRM_RUNS..]
                .iter()
                .filter_map(|st| st.outcome.peak_backlog)
                .filter(|f| f.is_finite())
                .reduce(f64::max);
            // The confirmations may have seen a longer stall than the search did (a relative
            // 1e-9 for rounding: a claim set at the cap must not step down again).
            if at > stall_cap(&s.steps) * (1.0 + 1e-9) {
                s.backlog_steps.push((at, peak.unwrap_or(0.0)));
                continue;
            }
            s.peak_backlog = peak;
            s.found_gbps = Some(at);
            s.confirmed_step = Some(s.steps.len() - 1);
            s.ended = meaning(&s, at, lo, &tried);
            return s;
        }
        let why = s
            .steps
            .last()
            .and_then(|st| st.why.clone())
            .unwrap_or_default();
        tried.push((at, why));
        s.backoffs += 1;
    }
}

/// The highest rate that survives a receiver stall [`STALL_FACTOR`] times longer than the
/// longest any passing trial saw (infinite when no backlog was measured). A trial at rate r
/// whose backlog peaked at fraction f of the buffer B saw a stall of about f*B/r; the longest
/// of them, t, allows R' with R' * STALL_FACTOR * t <= B. Every passing trial counts (the
/// search's and the confirmations', at any rate): the more stalls sampled, the surer the
/// longest. Failed trials are left out: above the capacity the buffer fills without a stall.
fn stall_cap(steps: &[Step]) -> f64 {
    let longest = longest_stall(steps);
    if longest > 0.0 {
        1.0 / (STALL_FACTOR * longest)
    } else {
        f64::INFINITY
    }
}

/// The longest stall the passing trials saw, in buffers per Gb/s (backlog fraction / rate):
/// times a rate, the fraction of the buffer that stall fills at that rate.
fn longest_stall(steps: &[Step]) -> f64 {
    steps
        .iter()
        .filter(|st| st.passed)
        .filter_map(|st| {
            let f = st.outcome.peak_backlog?;
            let r = st.asked_gbps.unwrap_or(st.outcome.offered_gbps);
            (f.is_finite() && r > 0.0).then_some(f / r)
        })
        .fold(0.0f64, f64::max)
}

fn failed_claims(tried: &[(f64, String)]) -> String {
    if tried.is_empty() {
        return "none".into();
    }
    tried
        .iter()
        .map(|(r, why)| format!("{r:.3} Gb/s: {why}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// What a confirmed rate means, in words: the runs at it, the margin and why, the spread, and
/// the claims that failed before it.
fn meaning(s: &Search, at: f64, passed: f64, tried: &[(f64, String)]) -> String {
    let e = &s.edge;
    let basis = match (e.lowest_lossy_gbps, e.carried_gbps) {
        (None, _) => format!(
            "nothing lost in any trial: the sender is the limit ({passed:.3} Gb/s unpaced), no \
             margin taken"
        ),
        (Some(l), carried) => {
            let spread = match carried {
                Some((a, b)) if e.spread_pct > 0.0 => format!(
                    "the receiving side carried {a:.3} - {b:.3} Gb/s in the trials that lost, a \
                     spread of {:.1} %",
                    e.spread_pct
                ),
                _ => "no spread measured (fewer than two trials lost)".into(),
            };
            let why = if s.backoffs > 0 {
                format!(
                    "the larger of the spread and {MIN_MARGIN_PCT:.0} % doubled for each of {} \
                     failed confirmation round(s), at most {MAX_MARGIN_PCT:.0} %",
                    s.backoffs
                )
            } else if e.spread_pct > MIN_MARGIN_PCT {
                "the spread".into()
            } else {
                format!("the floor of {MIN_MARGIN_PCT:.0} %")
            };
            format!(
                "{at:.3} Gb/s is {:.1} % below {l:.3} Gb/s, the lowest rate that lost anything \
                 (margin {:.1} %: {why}; {spread}; highest rate that passed the search \
                 {passed:.3} Gb/s)",
                (1.0 - at / l) * 100.0,
                e.margin_pct
            )
        }
    };
    let lowered = if tried.is_empty() {
        String::new()
    } else {
        format!(
            "; the loss curve is noisy here, the claim was lowered after {} failed \
             confirmation round(s) ({})",
            tried.len(),
            failed_claims(tried)
        )
    };
    let runs = &s.steps[s.steps.len().saturating_sub(CONFIRM_RUNS)..];
    let worst_loss = runs
        .iter()
        .map(|st| st.outcome.loss_pct)
        .fold(0.0, f64::max);
    let backlog = match s.peak_backlog {
        Some(pk) => format!(
            "; peak receive backlog {:.1} % of the socket buffer in these runs; a stall \
             {STALL_FACTOR:.0} x the longest any passing trial saw would fill {:.1} % of it at \
             {at:.3} Gb/s (at most 100 % allowed)",
            pk * 100.0,
            at * STALL_FACTOR * longest_stall(&s.steps) * 100.0
        ),
        None => "; receive backlog not measured (no headroom check)".into(),
    };
    let stepped = if s.backlog_steps.is_empty() {
        String::new()
    } else {
        format!(
            "; stepped down for backlog headroom from {} (rounds that held, but a stall \
             {STALL_FACTOR:.0} x the longest seen would have overflowed the buffer)",
            s.backlog_steps
                .iter()
                .map(|(r, pk)| format!("{r:.3} Gb/s at {:.1} %", pk * 100.0))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    format!(
        "confirmed at {at:.3} Gb/s by {CONFIRM_RUNS} runs in a row, none lost beyond the \
         allowed (each {CONFIRM_FLOORS} x the trial floor or longer; highest loss \
         {worst_loss:.4} %){backlog}; {basis}{lowered}{stepped} ({} trials)",
        s.steps.len()
    )
}

/// How long a trial at `rate_gbps` lasts: at least `floor`, and at least [`BUFFER_FILLS`]
/// times the time `buffer_bytes` take to fill at that rate; capped at [`MAX_TRIAL`]. The second
/// value says which rule decided.
pub fn trial_length(
    rate_gbps: Option<f64>,
    buffer_bytes: Option<u64>,
    floor: Duration,
) -> (Duration, &'static str) {
    let fill = match (rate_gbps, buffer_bytes) {
        (Some(r), Some(b)) if r > 0.0 && b > 0 => Some(Duration::from_secs_f64(
            BUFFER_FILLS * b as f64 * 8.0 / (r * 1e9),
        )),
        _ => None,
    };
    match fill {
        Some(f) if f > MAX_TRIAL && MAX_TRIAL > floor => (MAX_TRIAL, "cap"),
        Some(f) if f > floor => (f, "buffer"),
        _ => (floor, "floor"),
    }
}

/// A confirmation trial lasts [`CONFIRM_FLOORS`] times the floor (or longer where the buffer
/// rule says so): the rate it confirms is the one users will run at for longer than a search
/// trial, and on a busy host a longer trial is likelier to meet the disturbance that a short one
/// missed.
pub const CONFIRM_FLOORS: u32 = 3;

/// Length of a confirmation trial at `rate_gbps` (see [`CONFIRM_FLOORS`]).
pub fn confirm_length(
    rate_gbps: Option<f64>,
    buffer_bytes: Option<u64>,
    floor: Duration,
) -> (Duration, &'static str) {
    let (d, rule) = trial_length(rate_gbps, buffer_bytes, floor);
    let longer = floor * CONFIRM_FLOORS;
    if d >= longer {
        (d, rule)
    } else {
        (longer, "confirm")
    }
}

/// Payload Gb/s a link of `speed_mbps` carries with `message`-byte messages, each in its own
/// Ethernet/IPv4/UDP frame: 8 bytes preamble, 14 header, 20 IPv4, 8 UDP, 4 FCS and a 12-byte
/// gap around every message.
pub fn link_payload_gbps(speed_mbps: u64, message: usize) -> f64 {
    let overhead = 8 + 14 + 20 + 8 + 4 + 12;
    speed_mbps as f64 / 1000.0 * message as f64 / (message + overhead) as f64
}

/// CPU use added up by CPU number.
pub fn cpu_per_core(threads: &[ThreadCpu]) -> BTreeMap<String, f64> {
    let mut m = BTreeMap::new();
    for t in threads {
        let key = t
            .cpu
            .map(|c| c.to_string())
            .unwrap_or_else(|| "unpinned".into());
        *m.entry(key).or_insert(0.0) += t.utilization;
    }
    m
}

fn offered_gbps(r: &EngineResult) -> f64 {
    crate::metrics::gbps(r.sent * r.message_size as u64, r.duration_s)
}

/// How the search is shown while it runs.
pub trait Progress {
    /// A trial is about to start.
    fn trial_start(&mut self, n: usize, phase: Phase, asked: Option<f64>, length: Duration);
    /// It ended.
    fn trial_end(&mut self, t: &Trial);
}

/// No progress output.
pub struct Quiet;

impl Progress for Quiet {
    fn trial_start(&mut self, _: usize, _: Phase, _: Option<f64>, _: Duration) {}
    fn trial_end(&mut self, _: &Trial) {}
}

/// Runs the search with `engine`: every trial is `base` with its pacing and length changed.
/// Returns the record of the confirmed trial (or of the last trial when none was confirmed)
/// with `trials`, `max_loss_free_gbps` and `search` filled in; the caller judges it.
/// `link` is the hardware limit where one is known; otherwise the probe's offered rate is the
/// limit, labelled as such.
pub fn run(
    engine: &mut dyn Engine,
    base: &RunSpec,
    ctl: &RunControl,
    p: &Params,
    trial_floor: Duration,
    link: Option<Limit>,
    progress: &mut dyn Progress,
) -> crate::Result<EngineResult> {
    let mut results: Vec<EngineResult> = Vec::new();
    let mut trials: Vec<Trial> = Vec::new();
    let mut buffer: Option<u64> = None;
    let mut error: Option<crate::Error> = None;
    let params = Params {
        link_gbps: link.as_ref().map(|l| l.gbps),
        ..*p
    };
    let s = search(&params, |asked, phase| {
        if ctl.stopped() {
            return None;
        }
        let (length, rule) = match phase {
            Phase::Probe => (trial_floor, "floor"),
            Phase::Search => trial_length(asked, buffer, trial_floor),
            Phase::Confirm => confirm_length(asked, buffer, trial_floor),
        };
        let mut spec = base.clone();
        spec.rate_gbps = asked;
        spec.duration = length;
        progress.trial_start(trials.len() + 1, phase, asked, length);
        ctl.reset_counters();
        let r = match engine.run(&spec, ctl) {
            Ok(r) => r,
            Err(e) => {
                error = Some(e);
                return None;
            }
        };
        if buffer.is_none() {
            buffer = r.rx_buffer_bytes;
        }
        let o = Outcome {
            offered_gbps: offered_gbps(&r),
            delivered_gbps: r.gbps,
            loss_pct: r.loss_pct(),
            integrity_errors: r.integrity_errors,
            peak_backlog: r.rx_peak_backlog,
        };
        let (passed, why) = judge_trial(asked, &o, p.loss_pct);
        let t = Trial {
            phase,
            asked_gbps: asked,
            offered_gbps: o.offered_gbps,
            achieved_gbps: o.delivered_gbps,
            duration_s: r.duration_s,
            length_rule: rule.into(),
            sent: r.sent,
            received: r.packets,
            lost: r.lost,
            loss_pct: o.loss_pct,
            integrity_errors: r.integrity_errors,
            cpu_per_core: cpu_per_core(&r.threads),
            threads: r.threads.clone(),
            passed,
            why,
        };
        progress.trial_end(&t);
        trials.push(t);
        results.push(r);
        // A stop between trials (signal) ends the search with what it has.
        if ctl.stopped() {
            return None;
        }
        Some(o)
    });
    if results.is_empty() {
        return Err(error.unwrap_or_else(|| {
            crate::Error::Invalid("the search ended before its first trial".into())
        }));
    }
    let pick = s.confirmed_step.unwrap_or(results.len() - 1);
    let mut r = results.swap_remove(pick);
    let limit = link.or_else(|| {
        trials.first().map(|t| Limit {
            gbps: t.offered_gbps,
            source: "unpaced send rate of the probe trial (no link speed known: a veth pair, loopback or af_packet has none)"
                .into(),
        })
    });
    let found = s.confirmed_step.map(|i| trials[i].achieved_gbps);
    let fraction = match (found, &limit) {
        (Some(f), Some(l)) if l.gbps > 0.0 => Some(f / l.gbps),
        _ => None,
    };
    if let Some(e) = error {
        r.notes.push(format!("the search stopped on an error: {e}"));
    }
    match found {
        Some(f) => r.notes.push(format!(
            "loss-free maximum {f:.3} Gb/s (loss <= {} %){}",
            p.loss_pct,
            match (&limit, fraction) {
                (Some(l), Some(x)) => format!(
                    " = {:.1} % of {:.3} Gb/s, the {}",
                    x * 100.0,
                    l.gbps,
                    l.source
                ),
                _ => String::new(),
            }
        )),
        None => r
            .notes
            .push(format!("no loss-free rate confirmed: {}", s.ended)),
    }
    r.max_loss_free_gbps = found;
    r.search = Some(Summary {
        loss_allowed_pct: p.loss_pct,
        precision_pct: p.precision_pct,
        start_upper_gbps: s.start_upper_gbps,
        resolution_gbps: s.resolution_gbps,
        trial_floor_s: trial_floor.as_secs_f64(),
        buffer_bytes: buffer,
        limit,
        fraction_of_limit: fraction,
        confirm_runs: CONFIRM_RUNS,
        max_trials: p.max_trials,
        lowest_lossy_gbps: s.edge.lowest_lossy_gbps,
        carried_gbps: s.edge.carried_gbps,
        spread_pct: s.edge.spread_pct,
        base_gbps: s.edge.base_gbps,
        margin_pct: s.edge.margin_pct,
        backoffs: s.backoffs,
        ended: s.ended,
    });
    r.trials = trials;
    Ok(r)
}

/// Text table of a result's trials (empty without trials).
pub fn trials_table(r: &EngineResult) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    if r.trials.is_empty() {
        return s;
    }
    let _ = writeln!(
        s,
        "      {:>2}  {:<7} {:>9} {:>9} {:>9} {:>6} {:>10} {:>9} {:>4}  {:<14} result",
        "#", "phase", "asked", "offered", "achieved", "secs", "sent", "loss %", "bad", "cpu"
    );
    for (i, t) in r.trials.iter().enumerate() {
        let cpu: Vec<String> = t
            .cpu_per_core
            .iter()
            .map(|(c, u)| format!("{c}:{:.0}%", u * 100.0))
            .collect();
        let _ = writeln!(
            s,
            "      {:>2}  {:<7} {:>9} {:>9.3} {:>9.3} {:>6.1} {:>10} {:>9.4} {:>4}  {:<14} {}",
            i + 1,
            t.phase.as_str(),
            t.asked_gbps
                .map(|a| format!("{a:.3}"))
                .unwrap_or_else(|| "unpaced".into()),
            t.offered_gbps,
            t.achieved_gbps,
            t.duration_s,
            t.sent,
            t.loss_pct,
            t.integrity_errors,
            cpu.join(" "),
            if t.passed {
                "pass".to_string()
            } else {
                format!("fail: {}", t.why.as_deref().unwrap_or("?"))
            }
        );
    }
    if let Some(se) = &r.search {
        let _ = writeln!(
            s,
            "      search: loss <= {} %, start bounds 0 .. {:.3} Gb/s, resolution {:.3} Gb/s ({} % of the upper bound), trials >= {:.1} s and >= {} x the {} receive buffer{}; {}",
            se.loss_allowed_pct,
            se.start_upper_gbps,
            se.resolution_gbps,
            se.precision_pct,
            se.trial_floor_s,
            BUFFER_FILLS,
            se.buffer_bytes
                .map(|b| format!("{} KiB", b / 1024))
                .unwrap_or_else(|| "(unknown)".into()),
            // Reports written before --max-trials carry 0 here.
            if se.max_trials > 0 {
                format!(", at most {} trials", se.max_trials)
            } else {
                String::new()
            },
            se.ended
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A receiver that takes `cap` Gb/s without loss and drops the excess; the sender offers
    /// up to `sender` Gb/s.
    fn model(cap: f64, sender: f64) -> impl FnMut(Option<f64>, Phase) -> Option<Outcome> {
        move |asked, _| {
            let offered = asked.unwrap_or(sender).min(sender);
            let delivered = offered.min(cap);
            let loss = if offered > 0.0 {
                (offered - delivered) / offered * 100.0
            } else {
                0.0
            };
            Some(Outcome {
                offered_gbps: offered,
                delivered_gbps: delivered,
                loss_pct: loss,
                integrity_errors: 0,
                peak_backlog: None,
            })
        }
    }

    fn params() -> Params {
        Params {
            loss_pct: 0.0,
            precision_pct: 1.0,
            link_gbps: None,
            max_trials: MAX_TRIALS,
        }
    }

    fn check_invariants(s: &Search) {
        // The found rate passed CONFIRM_RUNS confirmations in a row, the last trials, and
        // stays the margin below every rate that lost anything.
        if let Some(f) = s.found_gbps {
            let i = s.confirmed_step.expect("confirmed");
            assert_eq!(i, s.steps.len() - 1);
            for st in &s.steps[s.steps.len() - CONFIRM_RUNS..] {
                assert_eq!(st.phase, Phase::Confirm);
                assert!(st.passed);
                assert_eq!(st.asked_gbps, Some(f));
            }
            for st in s.steps.iter().filter(|st| !st.passed) {
                let r = st.asked_gbps.unwrap_or(st.outcome.offered_gbps);
                assert!(f <= r * (1.0 - MIN_MARGIN_PCT / 100.0) + 1e-9, "{f} vs {r}");
            }
        }
        assert_eq!(s.steps[0].phase, Phase::Probe);
        assert!(s.steps.len() <= MAX_TRIALS);
    }

    #[test]
    fn converges_below_the_receivers_capacity() {
        let s = search(&params(), model(7.3, 20.0));
        check_invariants(&s);
        let f = s.found_gbps.expect("found");
        assert!(f <= 7.3, "{f}");
        assert!(
            7.3 - f <= s.resolution_gbps + 7.5 * MIN_MARGIN_PCT / 100.0 + 1e-9,
            "{f} res {}",
            s.resolution_gbps
        );
        assert_eq!(s.start_upper_gbps, 20.0);
        assert!((s.resolution_gbps - 0.2).abs() < 1e-9);
        // Probe, a guess at the delivered rate (7.3: right at the edge), bisection, confirm.
        assert!(
            s.steps.len() <= 9 + CONFIRM_RUNS,
            "{} trials",
            s.steps.len()
        );
    }

    #[test]
    fn sender_limited_path_confirms_the_unpaced_rate() {
        let s = search(&params(), model(50.0, 12.0));
        check_invariants(&s);
        assert_eq!(s.found_gbps, Some(12.0));
        assert_eq!(s.steps.len(), 1 + CONFIRM_RUNS, "probe and confirmations");
    }

    #[test]
    fn allowed_loss_moves_the_answer_up() {
        let mut p = params();
        p.loss_pct = 10.0;
        // Up to 10 % loss: capacity 9 carries 10 Gb/s offered at exactly 10 % loss.
        let s = search(&p, model(9.0, 30.0));
        check_invariants(&s);
        let f = s.found_gbps.expect("found");
        assert!(f > 9.0 && f <= 10.0 + 1e-9, "{f}");
    }

    #[test]
    fn link_speed_caps_the_upper_bound() {
        let mut p = params();
        p.link_gbps = Some(10.0);
        let s = search(&p, model(4.0, 40.0));
        check_invariants(&s);
        assert_eq!(s.start_upper_gbps, 10.0);
        assert!((s.resolution_gbps - 0.1).abs() < 1e-9);
        assert!(s.found_gbps.expect("found") <= 4.0);
    }

    #[test]
    fn everything_lost_finds_nothing() {
        let s = search(&params(), |asked: Option<f64>, _| {
            let o = asked.unwrap_or(5.0);
            Some(Outcome {
                offered_gbps: o,
                delivered_gbps: o * 0.5,
                loss_pct: 50.0,
                integrity_errors: 0,
                peak_backlog: None,
            })
        });
        assert_eq!(s.found_gbps, None);
        assert!(s.ended.contains("every rate tried lost"), "{}", s.ended);
        assert!(s.steps.iter().all(|t| !t.passed));
    }

    #[test]
    fn integrity_errors_and_a_short_sender_fail_a_trial() {
        let o = Outcome {
            offered_gbps: 1.0,
            delivered_gbps: 1.0,
            loss_pct: 0.0,
            integrity_errors: 1,
            peak_backlog: None,
        };
        assert!(!judge_trial(Some(1.0), &o, 0.0).0);
        let o = Outcome {
            integrity_errors: 0,
            peak_backlog: None,
            offered_gbps: 0.9,
            ..o
        };
        let (ok, why) = judge_trial(Some(1.0), &o, 0.0);
        assert!(!ok);
        assert!(why.expect("why").contains("offered only"));
        assert!(judge_trial(Some(0.94), &o, 0.0).0);
        assert!(judge_trial(None, &o, 0.0).0);
    }

    #[test]
    fn noisy_curve_reconfirms_below_a_failed_confirmation() {
        // Capacity 8, but the first confirmation is unlucky and loses 0.1 %: the search must
        // settle lower, on a rate that passed twice.
        let mut unlucky = true;
        let mut inner = model(8.0, 16.0);
        let s = search(&params(), |asked, phase| {
            let mut o = inner(asked, phase)?;
            if phase == Phase::Confirm && unlucky {
                unlucky = false;
                o.loss_pct = 0.1;
            }
            Some(o)
        });
        check_invariants(&s);
        let confirms = s.steps.iter().filter(|t| t.phase == Phase::Confirm).count();
        assert!(confirms >= 2, "{:?}", s.steps);
        let f = s.found_gbps.expect("found");
        assert!(f <= 8.0);
        // The failed confirmation's rate became an upper bound: the answer is below it.
        let failed = s
            .steps
            .iter()
            .find(|t| t.phase == Phase::Confirm && !t.passed)
            .and_then(|t| t.asked_gbps)
            .expect("a failed confirmation");
        assert!(f < failed, "{f} vs {failed}");
    }

    #[test]
    fn a_rate_that_passes_short_trials_but_not_long_ones_is_not_reported() {
        // Issue 28 on the 16-core machine: 2 s search trials passed up to ~39 Gb/s, but the
        // receiver at ~81 % of a core overflowed now and then in longer runs above ~37. Here the
        // first confirmation run at a rate above 37 passes (luck) and the second one loses:
        // one confirmation would have reported the rate; the search must go below 37.
        let mut runs_at: Vec<f64> = Vec::new();
        let s = search(&params(), |asked: Option<f64>, phase| {
            let o = asked.unwrap_or(45.0);
            let lossy = match phase {
                Phase::Probe => true,
                Phase::Search => o > 39.0,
                Phase::Confirm => {
                    let n = runs_at.iter().filter(|r| **r == o).count();
                    runs_at.push(o);
                    o > 37.0 && n >= 1
                }
            };
            Some(Outcome {
                offered_gbps: o,
                delivered_gbps: if lossy { o * 0.99 } else { o },
                loss_pct: if lossy { 1.0 } else { 0.0 },
                integrity_errors: 0,
                peak_backlog: None,
            })
        });
        check_invariants(&s);
        let f = s.found_gbps.expect("found");
        assert!(f <= 37.0, "{f}: {:?}", s.steps);
        assert!(f > 30.0, "{f}");
    }

    #[test]
    fn the_reported_rate_keeps_a_margin_below_the_lowest_lossy_rate() {
        // A sharp edge at 10.0 and a coarse resolution (precision 10 % of 20 = 2 Gb/s): the
        // bisection can stop just under the edge; the confirmed rate keeps the margin.
        let mut p = params();
        p.precision_pct = 10.0;
        let s = search(&p, model(10.0, 20.0));
        check_invariants(&s);
        let f = s.found_gbps.expect("found");
        let lowest_lossy = s
            .steps
            .iter()
            .filter(|t| !t.passed)
            .filter_map(|t| t.asked_gbps)
            .fold(f64::INFINITY, f64::min);
        assert!(lowest_lossy.is_finite());
        assert!(f <= lowest_lossy * 0.98 + 1e-9, "{f} vs {lowest_lossy}");
    }

    #[test]
    fn non_monotonic_curve_still_ends_on_a_confirmed_rate() {
        // Loss-free below 3, lossy in 3..5, loss-free again in 5..6 (a resonance), lossy above.
        let s = search(&params(), |asked: Option<f64>, _| {
            let o = asked.unwrap_or(12.0);
            let lossy = (3.0..5.0).contains(&o) || o >= 6.0;
            Some(Outcome {
                offered_gbps: o,
                delivered_gbps: if lossy { o * 0.99 } else { o },
                loss_pct: if lossy { 1.0 } else { 0.0 },
                integrity_errors: 0,
                peak_backlog: None,
            })
        });
        check_invariants(&s);
        let f = s.found_gbps.expect("found");
        assert!(f < 3.0 || (5.0..6.0).contains(&f), "{f}");
        // Every search trial respected the bounds it had: a pass never came above a fail
        // that preceded it in the bisection.
        assert!(s.steps.len() <= MAX_TRIALS);
    }

    /// A search over `model`'s path (capacity 5-11 Gb/s by seed) where one trial in
    /// `one_in`, below capacity too, loses a little anyway (seeded xorshift, no clock).
    fn noisy_search(p: &Params, seed: u64, one_in: u64) -> Search {
        let mut x = seed;
        let mut inner = model(5.0 + (seed % 7) as f64, 25.0);
        search(p, |asked, phase| {
            let mut o = inner(asked, phase)?;
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if x % one_in == 0 {
                o.loss_pct = o.loss_pct.max(0.01);
            }
            Some(o)
        })
    }

    #[test]
    fn random_noise_always_terminates_with_a_consistent_answer() {
        // 20 % of trials below capacity lose a little anyway.
        for seed in 1..200u64 {
            let s = noisy_search(&params(), seed, 5);
            check_invariants(&s);
            if let Some(f) = s.found_gbps {
                assert!(f <= 5.0 + (seed % 7) as f64 + 1e-9, "seed {seed}: {f}");
            } else {
                assert!(!s.ended.is_empty());
            }
        }
    }

    #[test]
    fn a_trial_cap_outside_the_range_is_named_as_its_input_spells_it() {
        let (least, most) = (*MAX_TRIALS_RANGE.start(), *MAX_TRIALS_RANGE.end());
        assert_eq!(max_trials_problem("--max-trials", least), None);
        assert_eq!(max_trials_problem("--max-trials", most), None);
        let e = max_trials_problem("--max-trials", least - 1).expect("one too few");
        assert!(e.starts_with("--max-trials must be within 7..=200"), "{e}");
        let e = max_trials_problem("max_trials", most + 1).expect("one too many");
        assert!(e.starts_with("max_trials must be within"), "{e}");
    }

    #[test]
    fn max_trials_bounds_a_noisy_search_and_says_where_it_stopped() {
        // A third of the trials lose a little, every seed: with `--max-trials` at its least the
        // search never runs more trials, and a search the cap stopped claims nothing and says
        // which of its two limits it met.
        let least = *MAX_TRIALS_RANGE.start();
        let p = Params {
            max_trials: least,
            ..params()
        };
        let mut searching = 0;
        for seed in 1..200u64 {
            let s = noisy_search(&p, seed, 3);
            let n = s.steps.len();
            assert!(n <= least, "seed {seed}: {n} trials");
            if s.ended.ends_with("still searching") {
                // Stopped in the bisection: every trial allowed was spent.
                searching += 1;
                assert_eq!(n, least, "seed {seed}: {}", s.ended);
                assert_eq!(s.found_gbps, None);
            } else if s.ended.contains("not enough left to confirm") {
                // Stopped before a round of five that would not fit.
                assert!(
                    n + CONFIRM_RUNS > least,
                    "seed {seed}: {n} trials: {}",
                    s.ended
                );
                assert_eq!(s.found_gbps, None);
            }
        }
        // A cap of 7 at 1 % precision leaves no room for the bisection: it must have bitten.
        assert!(searching > 0, "no search stopped in its bisection");
    }

    #[test]
    fn a_noisy_curve_lowers_the_claim_and_says_so() {
        // A busy host: 2 s search trials lose only above 7 Gb/s (the receiver's ceiling), but
        // the longer confirmations meet a stall now and then: every other one at 4 Gb/s or more
        // loses 0.5 %. The claim must step down, doubling its margin, until it holds, and say so.
        let mut confirms = 0u32;
        let s = search(&params(), |asked: Option<f64>, phase| {
            let o = asked.unwrap_or(12.0);
            let delivered = match phase {
                Phase::Confirm => {
                    confirms += 1;
                    if o >= 4.0 && confirms % 2 == 0 {
                        o * 0.995
                    } else {
                        o
                    }
                }
                _ => o.min(7.0),
            };
            Some(Outcome {
                offered_gbps: o,
                delivered_gbps: delivered,
                loss_pct: (o - delivered) / o * 100.0,
                integrity_errors: 0,
                peak_backlog: None,
            })
        });
        check_invariants(&s);
        let f = s.found_gbps.expect("a lowered claim, not no answer");
        assert!(f < 4.0, "{f}: {}", s.ended);
        assert!(s.backoffs >= 2, "{}", s.ended);
        assert!(
            s.ended.contains("the loss curve is noisy here"),
            "{}",
            s.ended
        );
        assert!(s.ended.contains("lowered after"), "{}", s.ended);
        assert!(s.edge.margin_pct >= 4.0 * MIN_MARGIN_PCT, "{:?}", s.edge);
    }

    #[test]
    fn a_claim_below_the_search_resolution_is_still_confirmed() {
        // The receiver takes 10 Gb/s in the search, then a stall during the first
        // confirmation: it carries 5 % of the claim. The next claim (half of what was carried)
        // is below the bisection's resolution (2 % of 18 Gb/s); on a busy host that is still a
        // rate to confirm, not a reason to report none.
        let mut first = true;
        let mut p = params();
        p.precision_pct = 2.0;
        let s = search(&p, |asked: Option<f64>, phase| {
            let o = asked.unwrap_or(18.0);
            let delivered = if phase == Phase::Confirm && std::mem::take(&mut first) {
                o * 0.05
            } else {
                o.min(10.0)
            };
            Some(Outcome {
                offered_gbps: o,
                delivered_gbps: delivered,
                loss_pct: (o - delivered) / o * 100.0,
                integrity_errors: 0,
                peak_backlog: None,
            })
        });
        check_invariants(&s);
        let f = s
            .found_gbps
            .unwrap_or_else(|| panic!("no rate: {}", s.ended));
        assert!(f < s.resolution_gbps, "{f} vs {}", s.resolution_gbps);
        assert!(s.ended.contains("loss 95.0000 % above"), "{}", s.ended);
    }

    /// A simulated host, deterministic (seeded xorshift, no clock): the receiving side's
    /// capacity changes every second, uniform within `spread` around `cap`, and one second in
    /// `stall_every` (0: never) it drops to `stall` of that (another process takes the CPU).
    /// A trial of n seconds at rate r loses when r exceeds the capacity of any of its seconds
    /// and delivers the smallest; the sender offers at most `sender`.
    struct SimHost {
        x: u64,
        cap: f64,
        spread: f64,
        stall_every: u64,
        stall: f64,
        sender: f64,
    }

    /// Search and probe trials last 2 s (the default floor), confirmations 3 floors, the
    /// later runs 5 s (`bench/udp_vs_iperf3.sh 5 5`).
    const SEARCH_S: u32 = 2;
    const CONFIRM_S: u32 = 2 * CONFIRM_FLOORS;
    const LATER_S: u32 = 5;

    impl SimHost {
        fn new(seed: u64, cap: f64, spread: f64, stall_every: u64, stall: f64) -> Self {
            SimHost {
                x: seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1,
                cap,
                spread,
                stall_every,
                stall,
                sender: cap * 1.8,
            }
        }

        fn next(&mut self) -> u64 {
            self.x ^= self.x << 13;
            self.x ^= self.x >> 7;
            self.x ^= self.x << 17;
            self.x
        }

        fn second(&mut self) -> f64 {
            let u = (self.next() % 1_000_000) as f64 / 1e6;
            let mut c = self.cap * (1.0 - self.spread + 2.0 * self.spread * u);
            if self.stall_every > 0 && self.next() % self.stall_every == 0 {
                c *= self.stall;
            }
            c
        }

        fn trial(&mut self, asked: Option<f64>, secs: u32) -> Outcome {
            let offered = asked.unwrap_or(self.sender).min(self.sender);
            let worst = (0..secs)
                .map(|_| self.second())
                .fold(f64::INFINITY, f64::min);
            let delivered = offered.min(worst);
            Outcome {
                offered_gbps: offered,
                delivered_gbps: delivered,
                loss_pct: (offered - delivered) / offered * 100.0,
                integrity_errors: 0,
                peak_backlog: None,
            }
        }

        fn search(&mut self) -> Search {
            let mut p = params();
            p.precision_pct = 2.0;
            search(&p, |asked, phase| {
                let secs = if phase == Phase::Confirm {
                    CONFIRM_S
                } else {
                    SEARCH_S
                };
                Some(self.trial(asked, secs))
            })
        }

        /// Paced runs of `LATER_S` at `rate` after the search: how many of `n` lost anything.
        fn later_losses(&mut self, rate: f64, n: usize) -> usize {
            (0..n)
                .filter(|_| self.trial(Some(rate), LATER_S).loss_pct > 0.0)
                .count()
        }
    }

    #[test]
    fn the_claim_holds_in_five_later_runs_on_a_noisy_edge() {
        // Issue 43 on the 16-core machine: the receiving side carried 46 - 51 Gb/s unpaced, the
        // search's rate passed its confirmations and then lost in 3 of 5 later 5 s runs. Here:
        // capacity 40 Gb/s +- 10 % from second to second. A claim within the noise band loses
        // in later runs; the claim must stay below the band, and say how far.
        let mut failed = Vec::new();
        for seed in 1..=200u64 {
            let mut h = SimHost::new(seed, 40.0, 0.10, 0, 1.0);
            let s = h.search();
            check_invariants(&s);
            let f = s.found_gbps.expect("a rate on a quiet host");
            if h.later_losses(f, 5) > 0 {
                failed.push((seed, f));
            }
            assert!(s.ended.contains("below"), "{}", s.ended);
            assert!(s.ended.contains("spread"), "{}", s.ended);
            assert!(s.edge.margin_pct >= MIN_MARGIN_PCT);
        }
        // The search before issue 43 (3 confirmations, 2 % below the lowest lossy rate): 38 of
        // these 200 claims lost in a later run; a claim per run with a 1 % chance of a loss
        // in 25 s would lose in about 2 of 200.
        assert!(failed.len() <= 4, "later runs lost at {failed:?}");
    }

    #[test]
    fn a_busy_host_still_confirms_a_rate_that_holds() {
        // Two busy cores beside the test: capacity 10 Gb/s +- 40 %, and one second in four the
        // receiver gets a third of that. The search must end on a confirmed rate (not "no rate
        // passed"), and that rate must hold in later runs nearly always.
        let mut later_failed = 0;
        for seed in 1..=200u64 {
            let mut h = SimHost::new(seed, 10.0, 0.40, 4, 0.33);
            let s = h.search();
            check_invariants(&s);
            let f = s
                .found_gbps
                .unwrap_or_else(|| panic!("seed {seed}: {}", s.ended));
            assert!(f > 0.5, "seed {seed}: {f}");
            if h.later_losses(f, 5) > 0 {
                later_failed += 1;
            }
        }
        // Before issue 43: 90 of 200.
        assert!(
            later_failed <= 10,
            "{later_failed} of 200 claims lost in later runs"
        );
    }

    #[test]
    fn the_margin_follows_the_measured_spread() {
        let lossy = |asked: f64, delivered: f64| Step {
            phase: Phase::Search,
            asked_gbps: Some(asked),
            outcome: Outcome {
                offered_gbps: asked,
                delivered_gbps: delivered,
                loss_pct: (asked - delivered) / asked * 100.0,
                integrity_errors: 0,
                peak_backlog: None,
            },
            passed: false,
            why: None,
        };
        // Lost at 50 carrying 40 and at 44 carrying 43.9: spread (43.9 - 40) / 43.9 = 8.9 %.
        let steps = [lossy(50.0, 40.0), lossy(44.0, 43.9)];
        let e = Edge::of(&steps, 0.0, 0);
        assert_eq!(e.lowest_lossy_gbps, Some(44.0));
        assert!((e.spread_pct - 8.884).abs() < 0.01, "{}", e.spread_pct);
        assert_eq!(e.margin_pct, e.spread_pct);
        // The margin is taken below the lowest rate carried (40), not the lowest lossy (44).
        assert_eq!(e.base_gbps, Some(40.0));
        assert!((e.claim(43.0) - 40.0 * (1.0 - e.spread_pct / 100.0)).abs() < 1e-9);
        // With 10 % loss allowed, carrying 40 loses exactly 10 % at 44.4.
        let e = Edge::of(&steps, 10.0, 0);
        assert_eq!(
            e.carried_gbps,
            Some((40.0, 40.0)),
            "43.9 of 44 is within 10 %"
        );
        assert!((e.base_gbps.expect("base") - 44.0).abs() < 1e-9);
        // A steady edge still keeps the floor; failed confirmations double it, to the cap.
        let steady = [lossy(50.0, 43.9), lossy(44.0, 43.9)];
        assert_eq!(Edge::of(&steady, 0.0, 0).margin_pct, MIN_MARGIN_PCT);
        assert_eq!(Edge::of(&steady, 0.0, 2).margin_pct, 4.0 * MIN_MARGIN_PCT);
        assert_eq!(Edge::of(&steady, 0.0, 9).margin_pct, MAX_MARGIN_PCT);
        // Nothing lost: the sender is the limit, no margin below anything.
        assert_eq!(Edge::of(&[], 0.0, 0).claim(12.0), 12.0);
    }

    /// A receiver with a socket buffer that is descheduled now and then (issue 43's busy
    /// host), deterministic (seeded xorshift, no clock). It drains `cap` Gb/s while it runs;
    /// each second it stalls once, for an exponentially distributed time (mean `stall_ms`).
    /// At rate r a stall of t queues r*t; above `buffer_gb` the excess is lost. A trial
    /// reports its peak backlog as a fraction of the buffer (at most 1, as a socket reports).
    struct StallHost {
        x: u64,
        cap: f64,
        buffer_gb: f64,
        stall_ms: f64,
    }

    impl StallHost {
        fn next(&mut self) -> f64 {
            self.x ^= self.x << 13;
            self.x ^= self.x >> 7;
            self.x ^= self.x << 17;
            // (0, 1]: ln never sees 0.
            ((self.x % 1_000_000) + 1) as f64 / 1e6
        }

        fn trial(&mut self, asked: Option<f64>, secs: u32) -> Outcome {
            let offered = asked.unwrap_or(self.cap * 1.8);
            let steady = offered.min(self.cap);
            let (mut lost_gb, mut peak) = (0.0f64, 0.0f64);
            for _ in 0..secs {
                let t = -self.next().ln() * self.stall_ms / 1000.0;
                let queued = steady * t;
                peak = peak.max(queued / self.buffer_gb);
                lost_gb += (queued - self.buffer_gb).max(0.0);
            }
            let sent = offered * f64::from(secs);
            let delivered = (steady * f64::from(secs) - lost_gb).max(0.0);
            Outcome {
                offered_gbps: offered,
                delivered_gbps: delivered / f64::from(secs),
                loss_pct: (sent - delivered) / sent * 100.0,
                integrity_errors: 0,
                peak_backlog: Some(peak.min(1.0)),
            }
        }

        /// The search as the engine runs it; `blind` hides the backlog (the search before the
        /// headroom rule saw only "lost or not").
        fn search(&mut self, blind: bool) -> Search {
            let mut p = params();
            p.precision_pct = 2.0;
            search(&p, |asked, phase| {
                let secs = if phase == Phase::Confirm {
                    CONFIRM_S
                } else {
                    SEARCH_S
                };
                let mut o = self.trial(asked, secs);
                if blind {
                    o.peak_backlog = None;
                }
                Some(o)
            })
        }

        fn later_losses(&mut self, rate: f64, n: usize) -> usize {
            (0..n)
                .filter(|_| self.trial(Some(rate), LATER_S).loss_pct > 0.0)
                .count()
        }
    }

    fn stall_host(seed: u64) -> StallHost {
        // 40 Gb/s drained, a 16 MB buffer (0.128 Gb: 3.2 ms at 40 Gb/s), stalls of 0.6 ms on
        // average: a stall that overflows at the edge is rare enough to pass 5 confirmations
        // and common enough to hit one of 5 later runs (issue 43: 3 of 5 lost).
        StallHost {
            x: seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1,
            cap: 40.0,
            buffer_gb: 0.128,
            stall_ms: 0.6,
        }
    }

    #[test]
    fn intermittent_stalls_a_claim_keeps_backlog_headroom_and_holds_later() {
        let (mut blind_failed, mut failed) = (0, 0);
        for seed in 1..=200u64 {
            // The search that sees only "lost or not".
            let mut h = stall_host(seed);
            let s = h.search(true);
            check_invariants(&s);
            if let Some(f) = s.found_gbps {
                if h.later_losses(f, 5) > 0 {
                    blind_failed += 1;
                }
            }
            // The same host, the search reading the backlog.
            let mut h = stall_host(seed);
            let s = h.search(false);
            check_invariants(&s);
            let f = s
                .found_gbps
                .unwrap_or_else(|| panic!("seed {seed}: {}", s.ended));
            let pk = s.peak_backlog.expect("measured");
            assert!(pk * STALL_FACTOR <= 1.0, "seed {seed}: {pk}");
            assert!(s.ended.contains("peak receive backlog"), "{}", s.ended);
            assert!(s.ended.contains("highest loss"), "{}", s.ended);
            if h.later_losses(f, 5) > 0 {
                failed += 1;
            }
        }
        eprintln!("later runs lost: blind {blind_failed} of 200, with headroom {failed} of 200");
        // Without the backlog the claims lose in later runs often (the model's stalls are
        // independent: 5 clean confirmations say little about the next 5 runs).
        // Measured: blind 19 of 200, with the headroom rule 0.
        assert!(blind_failed >= 15, "blind search: {blind_failed}");
        assert!(failed <= 2, "{failed} of 200 claims lost in later runs");
    }

    #[test]
    fn a_round_that_fills_the_buffer_steps_the_claim_down_by_its_headroom() {
        // A receiver that never loses below 10 Gb/s, but whose backlog at rate r is r/10 of
        // the buffer (the same stall each run): the margin's claim near 9.5 Gb/s fills 95 %,
        // so a stall STALL_FACTOR times as long would lose; the claim must step down to where
        // that stall fits (backlog at most 1/3, about 3.3 Gb/s) and say so.
        // Only the confirmations' longer runs meet the stall.
        let s = search(&params(), |asked, phase| {
            let offered = asked.unwrap_or(18.0);
            let delivered = offered.min(10.0);
            Some(Outcome {
                offered_gbps: offered,
                delivered_gbps: delivered,
                loss_pct: (offered - delivered) / offered * 100.0,
                integrity_errors: 0,
                peak_backlog: Some(if phase == Phase::Confirm {
                    (offered / 10.0).min(1.0)
                } else {
                    0.0
                }),
            })
        });
        check_invariants(&s);
        let f = s.found_gbps.expect("a rate");
        assert!(!s.backlog_steps.is_empty());
        for (r, pk) in &s.backlog_steps {
            assert!(pk * STALL_FACTOR > 1.0 && *r > f, "{r} {pk} {f}");
        }
        assert!(f / 10.0 * STALL_FACTOR <= 1.0 + 1e-9, "{f}");
        assert!(f > 3.0, "{f}");
        assert!(
            s.ended.contains("stepped down for backlog headroom"),
            "{}",
            s.ended
        );
    }

    #[test]
    fn a_stop_ends_the_search_with_what_it_has() {
        let mut n = 0;
        let mut inner = model(5.0, 10.0);
        let s = search(&params(), |a, ph| {
            n += 1;
            if n > 3 {
                return None;
            }
            inner(a, ph)
        });
        assert_eq!(s.steps.len(), 3);
        assert_eq!(s.found_gbps, None);
        assert!(s.ended.contains("stopped"));
        let s = search(&params(), |_, _| None);
        assert!(s.steps.is_empty());
    }

    #[test]
    fn trial_lengths() {
        let floor = Duration::from_secs(2);
        // 64 MiB at 1 Gb/s fills in 0.54 s: 4 fills = 2.15 s.
        let (d, rule) = trial_length(Some(1.0), Some(64 << 20), floor);
        assert_eq!(rule, "buffer");
        assert!((d.as_secs_f64() - 2.147).abs() < 0.01, "{d:?}");
        assert_eq!(
            trial_length(Some(10.0), Some(64 << 20), floor),
            (floor, "floor")
        );
        assert_eq!(trial_length(None, Some(64 << 20), floor), (floor, "floor"));
        assert_eq!(trial_length(Some(1.0), None, floor), (floor, "floor"));
        assert_eq!(
            trial_length(Some(0.001), Some(64 << 20), floor),
            (MAX_TRIAL, "cap")
        );
        // Confirmations last three floors at least.
        assert_eq!(
            confirm_length(Some(10.0), Some(64 << 20), floor),
            (floor * 3, "confirm")
        );
        assert_eq!(
            confirm_length(Some(0.001), Some(64 << 20), floor),
            (MAX_TRIAL, "cap")
        );
    }

    #[test]
    fn link_rates() {
        // 8192-byte messages on 100 GbE: 8192 / 8258 of the line.
        let g = link_payload_gbps(100_000, 8192);
        assert!((g - 99.2008).abs() < 1e-3, "{g}");
    }
}
