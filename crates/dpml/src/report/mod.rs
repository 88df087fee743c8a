//! Self-contained HTML reports: one page with inline CSS and inline SVG plots, no external
//! resources, readable offline and attachable to a review.
//!
//! Pages are rendered with `maud`, which escapes every interpolated string: names that come
//! from the user (a data set's file name, a column name) cannot inject markup. The only
//! unescaped content is the SVG that dpml's own plotter wrote (its text is escaped there).
//!
//! Every number is written as `<data value="EXACT">SHORT</data>`: readers see a rounded
//! figure, while the exact value the JSON holds stays in the page for anyone who needs it.

mod audit;
mod facts;

pub use audit::audit_html;

use maud::{DOCTYPE, Markup, PreEscaped, Render, html};

const CSS: &str = "body{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222;line-height:1.4}\
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #bbb;padding:4px 10px;text-align:right;vertical-align:top}\
th{background:#eee}td:first-child,th:first-child{text-align:left}.bad{background:#fdd;border:3px solid #c00;\
padding:1em;font-weight:bold}.ok{background:#dfd;padding:.5em 1em}svg{max-width:100%;height:auto}\
.unresolved{color:#999}.unresolved small{display:block;font-size:75%}.diag{background:#fff8e1;padding:.5em 1em;\
border-left:4px solid #e0a800}.headline{font-size:120%}dl.facts{margin:0}dl.facts dt{font-weight:bold;float:left;\
clear:left;margin-right:.5em}dl.facts dd{margin:0 0 0 1em}";

/// A number as the report shows it: rounded for reading, exact in the `value` attribute.
#[derive(Debug, Clone, Copy)]
pub struct Num(pub f64);

impl Render for Num {
    fn render(&self) -> Markup {
        html! { data value=(self.0) { (short(self.0)) } }
    }
}

/// An optional ε: "none (non-private)" when there is no guarantee.
pub struct OptEpsilon(pub Option<f64>);

impl Render for OptEpsilon {
    fn render(&self) -> Markup {
        match self.0 {
            Some(e) => Num(e).render(),
            None => html! { "none (non-private: no guarantee)" },
        }
    }
}

/// `v` for reading: integers whole, very small or large values in short scientific form
/// (1e-5, 3.2e8), others to four decimals without trailing zeros; "–" when not finite.
pub fn short(v: f64) -> String {
    if !v.is_finite() {
        return "–".into();
    }
    if v == v.trunc() && v.abs() < 1e6 {
        return format!("{v:.0}");
    }
    if v.abs() < 1e-3 || v.abs() >= 1e6 {
        let s = format!("{v:.3e}");
        return match s.split_once('e') {
            Some((mantissa, exp)) if mantissa.contains('.') => {
                let m = mantissa.trim_end_matches('0').trim_end_matches('.');
                format!("{m}e{exp}")
            }
            _ => s,
        };
    }
    let s = format!("{v:.4}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// A whole page: title, CSS, body.
fn page(title: &str, body: Markup) -> String {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                title { (title) }
                style { (PreEscaped(CSS)) }
            }
            body { (body) }
        }
    }
    .into_string()
}

/// dpml's own SVG plot, inlined: its XML declaration dropped so it can sit inside HTML.
fn inline_svg(svg: &str) -> Markup {
    PreEscaped(svg.find("<svg").map_or(svg, |i| &svg[i..]).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_numbers_read_well_and_keep_the_exact_value() {
        assert_eq!(short(1e-5), "1e-5");
        assert_eq!(short(2000.0), "2000");
        assert_eq!(short(0.123456), "0.1235");
        assert_eq!(short(0.5), "0.5");
        assert_eq!(short(3.25e8), "3.25e8");
        assert_eq!(short(f64::NAN), "–");
        assert_eq!(
            Num(0.123456).render().into_string(),
            "<data value=\"0.123456\">0.1235</data>"
        );
    }
}
