//! Self-contained HTML reports: one page with inline CSS and inline SVG plots, no external
//! resources, readable offline and attachable to a review.

use std::fmt::Write as _;

use dpml_audit::driver::{AttackOutcome, AuditReport};
use serde_json::Value;

const CSS: &str = "body{font-family:sans-serif;max-width:1000px;margin:2em auto;color:#222}\
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #bbb;padding:4px 10px;text-align:right}\
th{background:#eee}td:first-child,th:first-child{text-align:left}.bad{background:#fdd;border:3px solid #c00;\
padding:1em;font-weight:bold}.ok{background:#dfd;padding:.5em 1em}svg{max-width:100%;height:auto}";

/// Escapes text for HTML element content and attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn num(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.4}")
    } else {
        "–".into()
    }
}

fn opt(v: Option<f64>) -> String {
    v.map_or_else(|| "none (non-private)".into(), num)
}

/// The audit report page: setup, theoretical ε, each attack's metrics and ε lower bound, and
/// the ROC plot (`roc_svg`, inlined).
pub fn audit_html(r: &AuditReport, result: &Value, roc_svg: &str) -> String {
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>dpml privacy audit</title>\
         <style>{CSS}</style></head><body><h1>dpml privacy audit: {}</h1>",
        escape(&r.dataset)
    );
    if r.consistent {
        let _ = write!(
            h,
            "<p class=\"ok\">Consistent: every empirical lower bound is at or below the theoretical ε.</p>"
        );
    } else {
        let _ = write!(
            h,
            "<p class=\"bad\">AUDIT FAILED: attacks {} exceed the theoretical ε. This is a bug in dpml's \
             training or accounting.</p>",
            escape(&r.violations.join(", "))
        );
    }
    h.push_str("<h2>Setup</h2><table>");
    let recipe = &result["recipe"];
    let mut row = |k: &str, v: String| {
        let _ = write!(h, "<tr><td>{}</td><td>{}</td></tr>", escape(k), escape(&v));
    };
    row("data set", r.dataset.clone());
    row(
        "target size N (members = non-members)",
        r.target_size.to_string(),
    );
    row(
        "model",
        format!(
            "{} {}",
            recipe["model"].as_str().unwrap_or("?"),
            recipe["hidden"]
        ),
    );
    row(
        "epochs, batch size, lr",
        format!(
            "{}, {}, {}",
            recipe["epochs"],
            recipe["batch_size"],
            // The recipe holds lr as f32: print it as one, not as its f64 widening.
            recipe["learning_rate"]
                .as_f64()
                .map_or("?".into(), |v| (v as f32).to_string())
        ),
    );
    row("privacy", recipe["privacy"].to_string());
    row(
        "reference models K",
        r.reference_models.map_or("–".into(), |k| k.to_string()),
    );
    row(
        "canaries m",
        r.canaries.map_or("–".into(), |k| k.to_string()),
    );
    row("confidence of bounds", format!("{}", r.confidence));
    row("seeded", r.seeded.to_string());
    row(
        "models trained / from cache",
        format!("{} / {}", r.models_trained, r.models_from_cache),
    );
    row(
        "target accuracy: train / held-out",
        format!(
            "{} / {}",
            num(r.target_train_accuracy),
            num(r.target_holdout_accuracy)
        ),
    );
    row("wall time (s)", num(r.wall_seconds));
    h.push_str("</table><h2>Theoretical ε</h2><table>");
    let mut row = |k: &str, v: String| {
        let _ = write!(h, "<tr><td>{}</td><td>{}</td></tr>", escape(k), escape(&v));
    };
    row("ε (upper bound)", opt(r.epsilon_theoretical));
    row("δ", format!("{:e}", r.delta));
    row("accountant", r.theory.accountant.clone());
    row("noise multiplier σ", opt(r.theory.noise_multiplier));
    row(
        "sampling rate q, steps T",
        format!("{}, {}", num(r.theory.sampling_rate), r.theory.steps),
    );
    row(
        "best empirical ε lower bound",
        format!("{} ({})", num(r.epsilon_lower_bound), r.best_attack),
    );
    h.push_str(
        "</table><h2>Attacks</h2><table><tr><th>attack</th><th>AUC</th><th>TPR@1% FPR</th>\
         <th>TPR@0.1% FPR</th><th>TPR@0 FPR</th><th>advantage</th><th>ε lower bound</th></tr>",
    );
    for (name, o) in &r.attacks {
        match o {
            AttackOutcome::Threshold(m) => {
                let _ = write!(
                    h,
                    "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                    escape(name),
                    num(m.auc),
                    num(m.tpr("0.01")),
                    num(m.tpr("0.001")),
                    num(m.tpr("0")),
                    num(m.advantage),
                    num(m.epsilon_lower_bound)
                );
            }
            AttackOutcome::OneRun(o) => {
                let _ = write!(
                    h,
                    "<tr><td>{}</td><td colspan=\"5\">{} of {} guesses correct on {} canaries</td><td>{}</td></tr>",
                    escape(name),
                    o.correct,
                    o.guesses,
                    o.canaries,
                    num(o.epsilon_lower_bound)
                );
            }
            AttackOutcome::Attribute(a) => {
                let m = &a.metrics;
                let _ = write!(
                    h,
                    "<tr><td>{}</td><td colspan=\"5\">{}: accuracy {} on members, {} on non-members \
                     (baseline {})</td><td>{}</td></tr>",
                    escape(name),
                    escape(&a.sensitive_column),
                    num(m.member_accuracy),
                    num(m.nonmember_accuracy),
                    num(m.baseline_accuracy),
                    num(m.epsilon_lower_bound)
                );
            }
        }
    }
    h.push_str("</table>");
    if let Some(AttackOutcome::Attribute(a)) = r.attacks.get("attribute") {
        attribute_section(&mut h, a);
    }
    h.push_str("<h2>ROC (log-log)</h2>");
    // The SVG is our own plot; drop its XML declaration so it can sit inside HTML.
    let svg = roc_svg.find("<svg").map_or(roc_svg, |i| &roc_svg[i..]);
    h.push_str(svg);
    h.push_str(
        "<p>Each attack's threshold is chosen on a random half of the records and its ε lower bound \
         measured on the other half with Clopper–Pearson intervals. The dashed f-DP line is the largest \
         TPR the accountant allows at each FPR. The curves are raw counts: where only a few false \
         positives are possible they can cross that line by sampling noise alone; the ε lower bounds \
         account for this with their confidence intervals.</p></body></html>",
    );
    h
}

/// The attribute-inference section: the column, its candidates and what the guesses achieved.
fn attribute_section(h: &mut String, a: &dpml_audit::attribute::AttributeReport) {
    let m = &a.metrics;
    let kind = match a.candidate_kind {
        dpml_audit::attribute::CandidateKind::Categorical => "categorical values",
        dpml_audit::attribute::CandidateKind::QuantileBins => "quantile-bin medians",
    };
    let list = |v: &[f64]| v.iter().map(|&x| num(x)).collect::<Vec<_>>().join(", ");
    let _ = write!(
        h,
        "<h2>Attribute inference</h2><p>The attacker knows each record's label and every feature but \
         <b>{}</b>, tries each candidate value, and guesses the one minimising the target's loss minus \
         the log prior (Yeom et al. 2018). Under (ε, δ)-DP, P[correct | member] ≤ e<sup>ε</sup> \
         P[correct | non-member] + δ.</p><table>",
        escape(&a.sensitive_column)
    );
    let mut row = |k: &str, v: String| {
        let _ = write!(h, "<tr><td>{}</td><td>{}</td></tr>", escape(k), escape(&v));
    };
    row(&format!("candidates ({kind})"), list(&a.candidates));
    row("prior", list(&a.prior));
    row(
        "accuracy on members",
        format!(
            "{} ({} of {})",
            num(m.member_accuracy),
            m.member_correct.hits,
            m.member_correct.trials
        ),
    );
    row(
        "accuracy on non-members",
        format!(
            "{} ({} of {})",
            num(m.nonmember_accuracy),
            m.nonmember_correct.hits,
            m.nonmember_correct.trials
        ),
    );
    row(
        "baseline (most frequent candidate)",
        num(m.baseline_accuracy),
    );
    row("attribute advantage", num(m.advantage));
    row("ε lower bound", num(m.epsilon_lower_bound));
    h.push_str("</table>");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup() {
        assert_eq!(
            escape("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
    }
}
