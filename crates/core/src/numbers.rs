//! Numbers in messages and reports, written short: `{}` of 1e308 prints 309 digits.

/// Short scientific form with up to 3 significant digits: `1e308`, `1.5e-300`, `2.35e7`.
pub fn scientific(x: f64) -> String {
    let s = format!("{x:.2e}");
    match s.split_once('e') {
        Some((mantissa, exp)) => {
            let mantissa = mantissa.trim_end_matches('0').trim_end_matches('.');
            format!("{mantissa}e{exp}")
        }
        None => s,
    }
}

/// A number token longer than this is shortened. No u64 (20 digits) or f64 in Rust's shortest
/// form with a normal exponent reaches it; 1e308 printed with `{}` has 309 digits.
const LONG_NUMBER: usize = 24;

/// Rewrites every number written out in more than 24 characters (`LONG_NUMBER`: `{}` of 1e308
/// or 1e-300) in short scientific form (`1e308`), in one place for every message: the values
/// come from many parsers and libraries. Digits inside words (hex keys, paths) are left alone.
pub fn short_numbers(msg: &str) -> String {
    let chars: Vec<char> = msg.chars().collect();
    let mut out = String::with_capacity(msg.len());
    let mut i = 0;
    while i < chars.len() {
        let starts_word = i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_');
        if !chars[i].is_ascii_digit() || starts_word {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        let mut end = i;
        while end < chars.len() && (chars[end].is_ascii_digit() || chars[end] == '.') {
            end += 1;
        }
        let token: String = chars[i..end].iter().collect();
        let in_word = end < chars.len() && (chars[end].is_alphanumeric() || chars[end] == '_');
        match token.trim_end_matches('.').parse::<f64>() {
            Ok(v) if token.len() > LONG_NUMBER && !in_word => {
                out.push_str(&scientific(v));
                out.push_str(&token[token.trim_end_matches('.').len()..]);
            }
            _ => out.push_str(&token),
        }
        i = end;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_numbers_in_messages_are_shortened_and_words_kept() {
        let huge = format!("value {} is too large.", 1e308);
        assert_eq!(short_numbers(&huge), "value 1e308 is too large.");
        let tiny = format!("got {}", 1.5e-300);
        assert_eq!(short_numbers(&tiny), "got 1.5e-300");
        let kept = "seed 18446744073709551615, key 3dcaced012238ba8f6f903aec0988483c5a097f9, 0.1";
        assert_eq!(short_numbers(kept), kept);
    }

    #[test]
    fn scientific_keeps_three_digits() {
        assert_eq!(scientific(-2.346e-7), "-2.35e-7");
        assert_eq!(scientific(1e308), "1e308");
    }
}
