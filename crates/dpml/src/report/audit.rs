//! The page of `dpml audit`: verdict, setup, the accountant's ε, each attack's metrics and ε
//! lower bound, the one-run audit's own ε, attribute inference, the diagnostics, and the ROC
//! plot. Any fact of the audit JSON that the page does not lay out itself is listed under
//! "Further facts", so nothing the JSON says is missing here.

use dpml_audit::attribute::{AttributeReport, CandidateKind};
use dpml_audit::driver::metrics::FPR_TARGETS;
use dpml_audit::driver::{AttackMetrics, AttackOutcome, AuditReport, OneRunOutcome};
use maud::{Markup, html};
use serde_json::Value;

use super::{Num, OptEpsilon, facts, inline_svg, page};
use crate::privacy_model::{DIAGNOSTICS_KEY, DIAGNOSTICS_MEANING, DIAGNOSTICS_NOTE_KEY};

/// Top-level keys the command adds to the report's JSON and this page lays out by name.
const LAID_OUT: [&str; 5] = [
    "recipe",
    "threads",
    "lira_settings",
    DIAGNOSTICS_KEY,
    DIAGNOSTICS_NOTE_KEY,
];

/// The audit report page. `result` is the audit's JSON (the report, the recipe and what the
/// command added); `roc_svg` is the ROC plot, inlined.
pub fn audit_html(r: &AuditReport, result: &Value, roc_svg: &str) -> String {
    let body = html! {
        h1 { "dpml privacy audit: " (r.dataset) }
        (verdict(r))
        (headline(r))
        h2 { "Setup" }
        (setup(r, result))
        h2 { "The accountant's ε (upper bound)" }
        (theory(r))
        h2 { "Membership-inference attacks" }
        (threshold_attacks(r))
        @if let Some(AttackOutcome::OneRun(o)) = r.attacks.get("one_run") {
            (one_run(o, r))
        }
        @if let Some(AttackOutcome::Attribute(a)) = r.attacks.get("attribute") {
            (attribute(a))
        }
        (diagnostics(result))
        (further_facts(r, result))
        h2 { "ROC (log-log)" }
        (inline_svg(roc_svg))
        p {
            "Each attack's threshold is chosen on a random half of the records and its ε lower \
             bound measured on the other half with Clopper–Pearson intervals. The dashed f-DP \
             line is the largest TPR the accountant allows at each FPR. The curves are raw \
             counts: where only a few false positives are possible they can cross that line by \
             sampling noise alone; the ε lower bounds account for this with their confidence \
             intervals."
        }
    };
    page("dpml privacy audit", body)
}

fn verdict(r: &AuditReport) -> Markup {
    html! {
        @if r.epsilon_theoretical.is_none() {
            p { "No claim to check: the model states no ε (non-private, or scores audited \
                 without --epsilon), so the attacks' lower bounds are reported on their own." }
        } @else if r.consistent {
            p.ok { "Consistent: every empirical ε lower bound is at or below the accountant's ε." }
        } @else {
            p.bad {
                "AUDIT FAILED: attacks " (r.violations.join(", "))
                " exceed the accountant's ε. This is a bug in dpml's training or accounting."
            }
        }
    }
}

/// One sentence with the two ε's side by side.
fn headline(r: &AuditReport) -> Markup {
    html! {
        p.headline {
            "Accountant's ε = " (OptEpsilon(r.epsilon_theoretical)) " (δ = " (Num(r.delta)) ", "
            (r.theory.accountant) "); best empirical lower bound ε ≥ " (Num(r.epsilon_lower_bound))
            " (" (best_attack(r)) ") at " (Num(100.0 * r.confidence)) "% confidence."
        }
    }
}

/// The attack with the best bound, or why there is none.
fn best_attack(r: &AuditReport) -> &str {
    if r.best_attack.is_empty() {
        "no attack bounds ε above 0"
    } else {
        &r.best_attack
    }
}

fn row(name: &str, value: Markup) -> Markup {
    html! { tr { td { (name) } td { (value) } } }
}

fn opt_count(v: Option<usize>) -> Markup {
    match v {
        Some(k) => html! { (Num(k as f64)) },
        None => html! { "– (not run)" },
    }
}

fn setup(r: &AuditReport, result: &Value) -> Markup {
    html! {
        table {
            (row("data set", html! { (r.dataset) }))
            (row("target size N (members = non-members)", html! { (Num(r.target_size as f64)) }))
            (row("reference models K (LiRA)", opt_count(r.reference_models)))
            (row("canaries m (one-run audit)", opt_count(r.canaries)))
            (row("confidence of the lower bounds", html! { (Num(r.confidence)) }))
            (row("seeded (reproducible, not a secure release)", html! { (if r.seeded { "yes" } else { "no" }) }))
            @if let Some(t) = result.get("threads") { (row("threads", facts::value(t))) }
            @if let Some(l) = result.get("lira_settings") { (row("LiRA settings", facts::value(l))) }
            (row("models trained / loaded from the cache",
                html! { (Num(r.models_trained as f64)) " / " (Num(r.models_from_cache as f64)) }))
            (row("model cache", html! { (r.cache_dir.as_deref().unwrap_or("– (off)")) }))
            (row("training time (s)", html! { (Num(r.training_seconds)) }))
            (row("wall time (s)", html! { (Num(r.wall_seconds)) }))
        }
        @if let Some(Value::Object(recipe)) = result.get("recipe") {
            h3 { "Training recipe (target and reference models)" }
            table { (facts::rows(recipe, |_| true)) }
        }
    }
}

fn theory(r: &AuditReport) -> Markup {
    let t = &r.theory;
    html! {
        table {
            (row("ε", html! { (OptEpsilon(r.epsilon_theoretical)) }))
            @if t.epsilon != r.epsilon_theoretical {
                (row("ε of the accountant's statement", html! { (OptEpsilon(t.epsilon)) }))
            }
            (row("δ", html! { (Num(r.delta)) }))
            @if t.delta != r.delta {
                (row("δ of the accountant's statement", html! { (Num(t.delta)) }))
            }
            (row("accountant", html! { (t.accountant) }))
            (row("noise multiplier σ", html! { (OptEpsilon(t.noise_multiplier)) }))
            (row("sampling rate q", html! { (Num(t.sampling_rate)) }))
            (row("steps T", html! { (Num(t.steps as f64)) }))
            (row("best empirical ε lower bound",
                html! { (Num(r.epsilon_lower_bound)) " (" (best_attack(r)) ")" }))
        }
    }
}

/// "1%", "0.1%", "0" for the FPR targets.
fn percent(alpha: f64) -> String {
    if alpha == 0.0 {
        "0".into()
    } else {
        format!("{}%", super::short(100.0 * alpha))
    }
}

/// A TPR at FPR `alpha`, greyed with the sample size it needs when the non-members cannot
/// resolve `alpha` (fewer than 1/α of them: not even one false positive is allowed, so the
/// value is the TPR at FPR 0).
fn tpr_cell(m: &AttackMetrics, key: &str, alpha: f64) -> Markup {
    let resolved = m.fpr_resolvable.get(key).copied().unwrap_or(true);
    let needed = if alpha > 0.0 {
        (1.0 / alpha).ceil()
    } else {
        0.0
    };
    html! {
        @if resolved {
            td { (Num(m.tpr(key))) }
        } @else {
            td.unresolved title="the sample cannot resolve this FPR" {
                (Num(m.tpr(key)))
                small { "not resolved: needs ≥ " (Num(needed)) " non-members, has " (Num(m.non_members as f64)) }
            }
        }
    }
}

fn threshold_attacks(r: &AuditReport) -> Markup {
    let threshold: Vec<(&String, &AttackMetrics)> = r
        .attacks
        .iter()
        .filter_map(|(name, o)| match o {
            AttackOutcome::Threshold(m) => Some((name, m)),
            AttackOutcome::OneRun(_) | AttackOutcome::Attribute(_) => None,
        })
        .collect();
    html! {
        @if threshold.is_empty() {
            p { "No threshold attack ran." }
        } @else {
            table {
                tr {
                    th { "attack" } th { "AUC" }
                    @for (_, alpha) in FPR_TARGETS { th { "TPR at FPR " (percent(alpha)) } }
                    th { "advantage" } th { "ε estimate (plug-in)" }
                    th { "ε lower bound" } th { "members" } th { "non-members" }
                }
                @for (name, m) in &threshold {
                    tr {
                        td { (name) } td { (Num(m.auc)) }
                        @for (key, alpha) in FPR_TARGETS { (tpr_cell(m, key, alpha)) }
                        td { (Num(m.advantage)) } td { (Num(m.epsilon_estimate)) }
                        td { (Num(m.epsilon_lower_bound)) }
                        td { (Num(m.members as f64)) } td { (Num(m.non_members as f64)) }
                    }
                }
            }
            p {
                "The ε estimate is the plug-in value of the chosen threshold, not a bound; the \
                 lower bound holds with confidence " (Num(r.confidence)) ". A TPR at FPR α is \
                 resolved only with at least 1/α non-members (one false positive allowed); \
                 greyed values are the TPR at FPR 0."
            }
        }
    }
}

fn one_run(o: &OneRunOutcome, r: &AuditReport) -> Markup {
    html! {
        h2 { "One-run audit (canaries)" }
        p {
            "One model trains on the target's records with m mislabelled canaries, each \
             included or left out by a coin flip; the audit guesses which were included \
             (Steinke, Nasr and Jagielski 2023). Its model is its own training run, so it has \
             its own accountant's ε."
        }
        table {
            (row("ε lower bound (one run)", html! { (Num(o.epsilon_lower_bound)) }))
            (row("accountant's ε of the canary run", html! { (OptEpsilon(o.epsilon_theoretical)) }))
            (row("δ", html! { (Num(r.delta)) }))
            (row("confidence", html! { (Num(r.confidence)) }))
            (row("canaries m", html! { (Num(o.canaries as f64)) }))
            (row("guesses (in k₊ / out k₋)",
                html! { (Num(o.guesses as f64)) " (" (Num(o.k_plus as f64)) " / " (Num(o.k_minus as f64)) ")" }))
            (row("correct guesses", html! { (Num(o.correct as f64)) }))
        }
    }
}

fn attribute(a: &AttributeReport) -> Markup {
    let m = &a.metrics;
    let kind = match a.candidate_kind {
        CandidateKind::Categorical => "categorical values",
        CandidateKind::QuantileBins => "quantile-bin medians",
    };
    let list = |v: &[f64]| {
        html! { @for (i, x) in v.iter().enumerate() { @if i > 0 { ", " } (Num(*x)) } }
    };
    html! {
        h2 { "Attribute inference" }
        p {
            "The attacker knows each record's label and every feature but " b { (a.sensitive_column) }
            ", tries each candidate value, and guesses the one minimising the target's loss \
             minus the log prior (Yeom et al. 2018). Under (ε, δ)-DP, P[correct | member] ≤ e"
            sup { "ε" } " P[correct | non-member] + δ."
        }
        table {
            (row("sensitive column", html! { (a.sensitive_column) }))
            (row(&format!("candidates ({kind})"), list(&a.candidates)))
            (row("prior", list(&a.prior)))
            (row("accuracy on members", html! {
                (Num(m.member_accuracy)) " (" (Num(m.member_correct.hits as f64)) " of "
                (Num(m.member_correct.trials as f64)) ")" }))
            (row("accuracy on non-members", html! {
                (Num(m.nonmember_accuracy)) " (" (Num(m.nonmember_correct.hits as f64)) " of "
                (Num(m.nonmember_correct.trials as f64)) ")" }))
            (row("baseline (most frequent candidate)", html! { (Num(m.baseline_accuracy)) }))
            (row("attribute advantage", html! { (Num(m.advantage)) }))
            (row("ε estimate (plug-in)", html! { (Num(m.epsilon_estimate)) }))
            (row("ε lower bound", html! { (Num(m.epsilon_lower_bound)) }))
        }
    }
}

/// The target's accuracies: measured on the data without noise, marked as such.
fn diagnostics(result: &Value) -> Markup {
    html! {
        @if let Some(Value::Object(d)) = result.get(DIAGNOSTICS_KEY) {
            h2 { "Diagnostics" }
            div.diag {
                p {
                    @if let Some(Value::String(note)) = result.get(DIAGNOSTICS_NOTE_KEY) {
                        "This audit is " (note) "."
                    } @else {
                        "The figures below are " (DIAGNOSTICS_MEANING) "."
                    }
                }
                table { (facts::rows(d, |_| true)) }
            }
        }
    }
}

/// Top-level facts of `result` that no section above lays out (for example fields a newer
/// command adds), so the page never states less than the JSON.
fn further_facts(r: &AuditReport, result: &Value) -> Markup {
    let report_keys = serde_json::to_value(r).ok();
    let laid_out =
        |k: &str| LAID_OUT.contains(&k) || report_keys.as_ref().is_some_and(|v| v.get(k).is_some());
    html! {
        @if let Value::Object(map) = result {
            @if map.keys().any(|k| !laid_out(k)) {
                h2 { "Further facts" }
                table { (facts::rows(map, |k| !laid_out(k))) }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_names_the_fpr_targets() {
        let names: Vec<String> = FPR_TARGETS.iter().map(|&(_, a)| percent(a)).collect();
        assert_eq!(names, ["1%", "0.1%", "0"]);
    }
}
