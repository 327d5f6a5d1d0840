//! `--find-max`: an RFC 2544-style throughput search for the unreliable modes (UDP, DPDK raw
//! frames): the highest paced rate whose loss stays within `--loss`.
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
//! 3. **Confirm**: [`CONFIRM_RUNS`] more trials in a row at the found rate, each
//!    [`CONFIRM_FLOORS`] times as long as a search trial, and the rate confirmed is at least
//!    [`CONFIRM_MARGIN_PCT`] below the lowest rate that lost anything. One lossy confirmation
//!    fails the rate (a noisy or non-monotonic loss curve, or a receiver so close to its
//!    ceiling that a stall of a few milliseconds overflows its buffer): that rate becomes the
//!    upper bound, the search goes on below it from the highest rate that passed there, and
//!    the new result is confirmed again (at most [`MAX_CONFIRMATIONS`] confirmations).
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
/// Confirmation trials at most (each failed one restarts the search below it).
pub const MAX_CONFIRMATIONS: usize = 5;
/// Trials at most, probe and confirmations included.
pub const MAX_TRIALS: usize = 40;
/// Confirmation trials in a row that must all pass at the rate found. One 6 s confirmation
/// was not enough on the 16-core machine (issue 28): 38.12 Gb/s passed it, then three longer
/// runs at that rate lost 0.65 - 1.6 %; a rate that holds must hold more than once.
pub const CONFIRM_RUNS: usize = 3;
/// The rate confirmed stays this many percent below the lowest rate that lost anything: the
/// bisection can end up to one resolution (2 % by default) under a lossy rate, right at the
/// receiver's ceiling, where a short pause of the receiving thread already overflows it.
pub const CONFIRM_MARGIN_PCT: f64 = 2.0;
/// When [`MAX_CONFIRMATIONS`] have failed (a busy host's loss curve), the claim is lowered to
/// this share of the lowest rate that lost, and again by the same share while confirmations
/// fail and trials remain: each step cuts the rate by a fifth, far more than the noise that
/// defeated the 2 % margin, so a few steps reach a rate the host holds (issue 43: a search
/// beside a TCP benchmark gave up instead of reporting a lower rate).
pub const LOWER_FACTOR: f64 = 0.8;
/// A trial lasts at least this many times the time the receive buffer takes to fill at the
/// trial's rate: shorter, and a receiver slower than the sender could end the trial with its
/// backlog still in the buffer and never show the loss.
pub const BUFFER_FILLS: f64 = 4.0;
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
    /// The confirmed rate (the asked rate of the passing confirmation trial).
    pub found_gbps: Option<f64>,
    /// Index in `steps` of the passing confirmation trial.
    pub confirmed_step: Option<usize>,
    /// Upper start bound and resolution actually used, Gb/s.
    pub start_upper_gbps: f64,
    pub resolution_gbps: f64,
    /// Why the search ended, in words.
    pub ended: String,
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
        ended: String::new(),
    };
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
    let mut confirmations = 0usize;
    loop {
        while hi - lo > res {
            if s.steps.len() >= MAX_TRIALS {
                s.ended = format!("stopped after {MAX_TRIALS} trials");
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
        if confirmations >= MAX_CONFIRMATIONS || s.steps.len() + CONFIRM_RUNS > MAX_TRIALS {
            // A noisy curve (a busy host): rather than no answer, a lower claim that holds,
            // said as such.
            let lowest_lossy = s
                .steps
                .iter()
                .filter(|st| !st.passed)
                .filter_map(|st| st.asked_gbps.or(Some(st.outcome.offered_gbps)))
                .fold(f64::INFINITY, f64::min);
            let mut claim = lowest_lossy.min(hi) * LOWER_FACTOR;
            while claim >= res && s.steps.len() + CONFIRM_RUNS <= MAX_TRIALS {
                let mut held = true;
                for _ in 0..CONFIRM_RUNS {
                    let Some(passed) = run(&mut s, Some(claim), Phase::Confirm) else {
                        s.ended = "stopped during the confirmation".into();
                        return s;
                    };
                    if !passed {
                        held = false;
                        break;
                    }
                }
                if held {
                    s.found_gbps = Some(claim);
                    s.confirmed_step = Some(s.steps.len() - 1);
                    s.ended = format!(
                        "the loss curve is noisy here: {confirmations} confirmation(s) below the \
                         search's bound lost; the claim was lowered to {claim:.3} Gb/s \
                         ({:.0} % of {lowest_lossy:.3} Gb/s, the lowest rate that lost), which \
                         held {CONFIRM_RUNS} trials in a row ({} trials)",
                        claim / lowest_lossy * 100.0,
                        s.steps.len()
                    );
                    return s;
                }
                claim *= LOWER_FACTOR;
            }
            s.ended = format!(
                "no rate passed its confirmation ({confirmations} tried, and lowered claims down \
                 to {:.3} Gb/s): the loss curve is too noisy here",
                claim / LOWER_FACTOR
            );
            return s;
        }
        confirmations += 1;
        // Keep a margin below the lowest rate that lost anything (none when only the probe
        // ran: the sender was the limit, nothing was lost).
        let lowest_lossy = s
            .steps
            .iter()
            .filter(|st| !st.passed)
            .filter_map(|st| st.asked_gbps.or(Some(st.outcome.offered_gbps)))
            .fold(f64::INFINITY, f64::min);
        let at = lo.min(lowest_lossy * (1.0 - CONFIRM_MARGIN_PCT / 100.0));
        if at <= 0.0 {
            s.ended = format!("every rate tried lost messages, down to {hi:.3} Gb/s");
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
            s.found_gbps = Some(at);
            s.confirmed_step = Some(s.steps.len() - 1);
            s.ended = format!(
                "bounds within {res:.3} Gb/s; confirmed at {at:.3} Gb/s by {CONFIRM_RUNS} trials \
                 in a row ({} trials)",
                s.steps.len()
            );
            return s;
        }
        lo = at;
        // Not reliably loss-free: search again below it, from the highest rate that passed
        // there (a noisy curve can have passed a rate above one that failed).
        hi = lo;
        lo = s
            .steps
            .iter()
            .filter(|st| st.passed && st.phase != Phase::Probe)
            .filter_map(|st| st.asked_gbps)
            .filter(|r| *r < hi)
            .fold(0.0, f64::max);
        if lo <= 0.0 && probe_passed && probe.delivered_gbps < hi {
            lo = probe.delivered_gbps;
        }
    }
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

/// Reads a link speed in Mb/s from sysfs `speed` text (`-1` or garbage = unknown, as for a
/// veth or a link that is down).
pub fn parse_speed_mbps(text: &str) -> Option<u64> {
    text.trim()
        .parse::<i64>()
        .ok()
        .filter(|v| *v > 0)
        .map(|v| v as u64)
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
            "      search: loss <= {} %, start bounds 0 .. {:.3} Gb/s, resolution {:.3} Gb/s ({} % of the upper bound), trials >= {:.1} s and >= {} x the {} receive buffer; {}",
            se.loss_allowed_pct,
            se.start_upper_gbps,
            se.resolution_gbps,
            se.precision_pct,
            se.trial_floor_s,
            BUFFER_FILLS,
            se.buffer_bytes
                .map(|b| format!("{} KiB", b / 1024))
                .unwrap_or_else(|| "(unknown)".into()),
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
            })
        }
    }

    fn params() -> Params {
        Params {
            loss_pct: 0.0,
            precision_pct: 1.0,
            link_gbps: None,
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
                assert!(
                    f <= r * (1.0 - CONFIRM_MARGIN_PCT / 100.0) + 1e-9,
                    "{f} vs {r}"
                );
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
            7.3 - f <= s.resolution_gbps + 7.5 * CONFIRM_MARGIN_PCT / 100.0 + 1e-9,
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
        };
        assert!(!judge_trial(Some(1.0), &o, 0.0).0);
        let o = Outcome {
            integrity_errors: 0,
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
            })
        });
        check_invariants(&s);
        let f = s.found_gbps.expect("found");
        assert!(f < 3.0 || (5.0..6.0).contains(&f), "{f}");
        // Every search trial respected the bounds it had: a pass never came above a fail
        // that preceded it in the bisection.
        assert!(s.steps.len() <= MAX_TRIALS);
    }

    #[test]
    fn random_noise_always_terminates_with_a_consistent_answer() {
        // Pseudo-random noise (xorshift): 20 % of trials below capacity lose a little anyway.
        for seed in 1..200u64 {
            let mut x = seed;
            let mut inner = model(5.0 + (seed % 7) as f64, 25.0);
            let s = search(&params(), |asked, phase| {
                let mut o = inner(asked, phase)?;
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                if x % 5 == 0 {
                    o.loss_pct = o.loss_pct.max(0.01);
                }
                Some(o)
            });
            check_invariants(&s);
            if let Some(f) = s.found_gbps {
                assert!(f <= 5.0 + (seed % 7) as f64 + 1e-9, "seed {seed}: {f}");
            } else {
                assert!(!s.ended.is_empty());
            }
        }
    }

    #[test]
    fn a_noisy_curve_lowers_the_claim_and_says_so() {
        // A busy host: every rate above 4 Gb/s loses now and then (each third trial there),
        // so confirmations near the search's edge (about 7) keep failing; below 4 it holds.
        let mut n = 0u32;
        let s = search(&params(), |asked: Option<f64>, _| {
            let o = asked.unwrap_or(12.0);
            n += 1;
            let lossy = o >= 7.0 || (o >= 4.0 && n % 3 == 0);
            Some(Outcome {
                offered_gbps: o,
                delivered_gbps: if lossy { o * 0.99 } else { o },
                loss_pct: if lossy { 0.5 } else { 0.0 },
                integrity_errors: 0,
            })
        });
        check_invariants(&s);
        let f = s.found_gbps.expect("a lowered claim, not no answer");
        assert!(f < 7.0 * LOWER_FACTOR + 1e-9, "{f}");
        assert!(
            s.ended.starts_with("the loss curve is noisy here"),
            "{}",
            s.ended
        );
        assert!(s.ended.contains("lowered"), "{}", s.ended);
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
        assert_eq!(parse_speed_mbps("25000\n"), Some(25000));
        assert_eq!(parse_speed_mbps("-1"), None);
        assert_eq!(parse_speed_mbps(""), None);
        assert_eq!(parse_speed_mbps("fast"), None);
    }
}
