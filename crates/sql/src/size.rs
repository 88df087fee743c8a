//! How large a query dpml plans, checked on its tokens before anything is parsed.
//!
//! DataFusion builds and walks plans and expressions recursively, and some of its passes take
//! time cubic in the number of joins: a long chain of operators or of joined tables (easy to
//! write, or to generate) exhausts the stack, which aborts the process, or plans for minutes.
//! Counting tokens is linear and needs no tree, so it runs first; the limits are far above
//! what analysts write (TPC-H's largest query has 8 tables and about 100 terms).

use datafusion::sql::sqlparser::dialect::Dialect;
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};

use crate::error::{Result, SqlError};

/// The most operators and keywords one query may have: each can deepen a plan or an
/// expression by one level.
pub const MAX_TERMS: usize = 2_000;
/// The most SELECTs and tables in FROM lists and joins one query may have.
pub const MAX_RELATIONS: usize = 64;
/// The most calls one inside another: parentheses or brackets opened right after a word
/// (`CAST(`, `IFNULL(`, `ARRAY[`). The SQL parser tries a keyword call again as a function call
/// when it fails, and one that fails for being nested too deep fails both ways, so each level
/// doubled the parse (50 nested `CAST`s parsed for hours); DataFusion rewrites `IFNULL`, `NVL`
/// and `COALESCE` into expressions that repeat their argument, so each level doubles the plan
/// (30 nested `IFNULL`s asked for gigabytes).
pub const MAX_CALL_NESTING: usize = 12;

/// Refuses a query with more than [`MAX_TERMS`] operators and keywords or more than
/// [`MAX_RELATIONS`] SELECTs and tables. Text that does not tokenize passes: the parser then
/// says what is wrong with it.
pub(crate) fn check(sql: &str, dialect: &dyn Dialect) -> Result<()> {
    let Ok(tokens) = Tokenizer::new(dialect, sql).tokenize() else {
        return Ok(());
    };
    let Counts {
        terms,
        relations,
        call_nesting,
    } = count(&tokens);
    if call_nesting > MAX_CALL_NESTING {
        return Err(SqlError::input(format!(
            "the query nests {call_nesting} calls such as CAST(…) or IFNULL(…) one inside \
             another, more than the {MAX_CALL_NESTING} dpml plans: split it or drop redundant ones"
        )));
    }
    if terms > MAX_TERMS {
        return Err(SqlError::input(format!(
            "the query has {terms} operators and keywords, more than the {MAX_TERMS} dpml plans \
             (long chains nest too deep to plan): split it"
        )));
    }
    if relations > MAX_RELATIONS {
        return Err(SqlError::input(format!(
            "the query has {relations} SELECTs and tables, more than the {MAX_RELATIONS} dpml \
             plans (planning time grows with the cube of the joins): split it"
        )));
    }
    Ok(())
}

/// What [`check`] limits in a query.
struct Counts {
    /// Operators and keywords.
    terms: usize,
    /// SELECTs and tables.
    relations: usize,
    /// The deepest nesting of calls: parentheses or brackets opened right after a word.
    call_nesting: usize,
}

/// Counts a query's tokens. Over-counting is safe: a word that only looks like a keyword, or a
/// comma after `FROM` inside a function's arguments, counts too.
fn count(tokens: &[Token]) -> Counts {
    let (mut terms, mut relations) = (0, 0);
    // Per parenthesis level: whether the words so far are in a FROM list, where a comma
    // adds a table, and whether a word opened it as a call.
    let mut in_from = vec![false];
    let mut call = vec![false];
    let (mut calls_open, mut call_nesting) = (0usize, 0usize);
    let mut after_word = false;
    for token in tokens {
        match token {
            Token::LParen | Token::LBracket => {
                call.push(after_word);
                calls_open += usize::from(after_word);
                call_nesting = call_nesting.max(calls_open);
            }
            Token::RParen | Token::RBracket if call.len() > 1 => {
                calls_open -= usize::from(call.pop().unwrap_or(false));
            }
            _ => {}
        }
        if !matches!(token, Token::Whitespace(_)) {
            after_word = matches!(token, Token::Word(_));
        }
        match token {
            Token::Whitespace(_)
            | Token::Comma
            | Token::Period
            | Token::LParen
            | Token::RParen
            | Token::Number(..)
            | Token::SingleQuotedString(_)
            | Token::DoubleQuotedString(_)
            | Token::NationalStringLiteral(_)
            | Token::EscapedStringLiteral(_)
            | Token::HexStringLiteral(_) => {}
            Token::Word(w) if w.keyword == Keyword::NoKeyword => {}
            _ => terms += 1,
        }
        let level = in_from.len() - 1;
        match token {
            Token::LParen => in_from.push(false),
            Token::RParen if level > 0 => {
                in_from.pop();
            }
            Token::Comma if in_from[level] => relations += 1,
            Token::Word(w) => match w.keyword {
                Keyword::SELECT | Keyword::JOIN => {
                    relations += 1;
                    in_from[level] &= w.keyword == Keyword::JOIN;
                }
                Keyword::FROM => in_from[level] = true,
                Keyword::WHERE
                | Keyword::GROUP
                | Keyword::HAVING
                | Keyword::ORDER
                | Keyword::LIMIT
                | Keyword::QUALIFY
                | Keyword::WINDOW
                | Keyword::UNION
                | Keyword::INTERSECT
                | Keyword::EXCEPT => in_from[level] = false,
                _ => {}
            },
            _ => {}
        }
    }
    Counts {
        terms,
        relations,
        call_nesting,
    }
}

#[cfg(test)]
mod tests {
    use datafusion::sql::sqlparser::dialect::GenericDialect;

    use super::*;

    fn counts(sql: &str) -> (usize, usize) {
        let c = count(&Tokenizer::new(&GenericDialect {}, sql).tokenize().unwrap());
        (c.terms, c.relations)
    }

    fn call_nesting(sql: &str) -> usize {
        count(&Tokenizer::new(&GenericDialect {}, sql).tokenize().unwrap()).call_nesting
    }

    #[test]
    fn calls_count_where_they_nest() {
        assert_eq!(call_nesting("SELECT CAST(CAST(x AS INT) AS DOUBLE)"), 2);
        // Side by side or behind plain parentheses: not nested calls.
        assert_eq!(
            call_nesting("SELECT CAST(x AS INT), ifnull ( y, 0 ) FROM t"),
            1
        );
        assert_eq!(call_nesting("SELECT 1 + ((x))"), 0);
        assert_eq!(call_nesting("SELECT f(g(h(x)))"), 3);
        assert_eq!(call_nesting("SELECT ARRAY[ARRAY[1], [2]]"), 2);
        assert_eq!(
            call_nesting("SELECT SUM(CASE WHEN EXTRACT(YEAR FROM d) > 1 THEN 1 END)"),
            2
        );
    }

    #[test]
    fn tables_count_in_from_lists_and_joins() {
        assert_eq!(counts("SELECT COUNT(*) FROM t").1, 1);
        assert_eq!(counts("SELECT a, b, c FROM t, u, v WHERE x IN (1, 2)").1, 3);
        assert_eq!(
            counts("SELECT a FROM t JOIN u ON f(x, y) = z, v GROUP BY a, b").1,
            3
        );
        assert_eq!(
            counts("SELECT a FROM (SELECT b, c FROM u, v) s, w ORDER BY a, b").1,
            4
        );
        assert_eq!(
            counts("SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3").1,
            3
        );
    }

    #[test]
    fn literals_names_and_punctuation_are_not_terms() {
        assert_eq!(counts("x IN (1, 'a', 2.5, \"q\")").0, 1);
        assert_eq!(counts("a + b * c").0, 2);
        // Two casts to a type whose name is a keyword.
        assert_eq!(counts("x::double::double").0, 4);
    }

    #[test]
    fn chains_past_the_limits_are_refused_by_name() {
        let plus = format!(
            "SELECT COUNT(*) FROM t WHERE x < 1{}",
            "+1".repeat(MAX_TERMS)
        );
        let e = check(&plus, &GenericDialect {}).unwrap_err();
        let terms = format!("has {} operators and keywords", counts(&plus).0);
        assert!(e.is_input() && e.to_string().contains(&terms), "{e}");
        let joins: String = (0..MAX_RELATIONS)
            .map(|i| format!(" JOIN r r{i} ON a = b"))
            .collect();
        let e = check(
            &format!("SELECT COUNT(*) FROM t{joins}"),
            &GenericDialect {},
        )
        .unwrap_err();
        assert!(e.to_string().contains("65 SELECTs and tables"), "{e}");
        // Nested CASTs behind unary minuses reach the parser's depth limit inside the casts,
        // where each level doubled the parse; nested IFNULLs double the plan at each level.
        let nest = |call: &str, end: &str| {
            (0..MAX_CALL_NESTING).fold("x".to_string(), |e, _| format!("{call}({e}{end})"))
        };
        for (inner, calls) in [
            (
                format!("{}{}", "- ".repeat(18), nest("CAST", " AS DOUBLE")),
                13,
            ),
            (nest("IFNULL", ", 0"), 13),
            (format!("ARRAY[{}]", nest("ARRAY", "")), 14),
        ] {
            let e = check(&format!("SELECT SUM({inner}) FROM t"), &GenericDialect {}).unwrap_err();
            let words = format!("nests {calls} calls");
            assert!(e.is_input() && e.to_string().contains(&words), "{e}");
        }
        assert!(
            check(
                "SELECT COUNT(*) FROM t WHERE 'unterminated",
                &GenericDialect {}
            )
            .is_ok()
        );
    }
}
