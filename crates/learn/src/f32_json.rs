//! f32 values in JSON as the decimal a person reads. serde_json widens an f32 to f64, so a
//! learning rate of 0.03 would print as 0.029999999329447746; these helpers print the f64 with
//! the f32's shortest decimal form instead (0.03). Reading the JSON back into an f32 gives the
//! same f32, so saved configurations round-trip exactly.

use serde::Serializer;
use serde::ser::SerializeSeq as _;

/// The f64 with the same shortest decimal form as `x` (0.1f32 → 0.1, not 0.10000000149).
pub fn decimal(x: f32) -> f64 {
    x.to_string().parse().unwrap_or(f64::from(x))
}

/// `#[serde(serialize_with = "crate::f32_json::one")]` for an `f32` field.
pub fn one<S: Serializer>(x: &f32, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(decimal(*x))
}

/// `#[serde(serialize_with = "crate::f32_json::option")]` for an `Option<f32>` field.
pub fn option<S: Serializer>(x: &Option<f32>, s: S) -> Result<S::Ok, S::Error> {
    match x {
        Some(v) => s.serialize_some(&decimal(*v)),
        None => s.serialize_none(),
    }
}

/// `#[serde(serialize_with = "crate::f32_json::pairs")]` for a `Vec<(f32, f32)>` field.
pub fn pairs<S: Serializer>(x: &[(f32, f32)], s: S) -> Result<S::Ok, S::Error> {
    let mut seq = s.serialize_seq(Some(x.len()))?;
    for &(a, b) in x {
        seq.serialize_element(&(decimal(a), decimal(b)))?;
    }
    seq.end()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f32_values_print_as_typed_and_read_back_exactly() {
        #[derive(serde::Serialize)]
        struct Cfg {
            #[serde(serialize_with = "one")]
            lr: f32,
            #[serde(serialize_with = "option")]
            ema: Option<f32>,
            #[serde(serialize_with = "pairs")]
            ranges: Vec<(f32, f32)>,
        }
        let cfg = Cfg {
            lr: 0.03,
            ema: Some(0.995),
            ranges: vec![(4.3, 7.9)],
        };
        let text = serde_json::to_string(&cfg).unwrap();
        assert_eq!(text, r#"{"lr":0.03,"ema":0.995,"ranges":[[4.3,7.9]]}"#);
        let back: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back["lr"].as_f64().unwrap() as f32, 0.03f32);
        assert_eq!(back["ranges"][0][1].as_f64().unwrap() as f32, 7.9f32);
    }
}
