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
/// The most parentheses opened right after a keyword (`CAST(`, `EXTRACT(`, `SUBSTRING(`) one
/// inside another. The SQL parser tries such a construct again as a function call when it
/// fails, and one that fails for being nested too deep fails both ways: each level doubles
/// the parse (50 nested `CAST`s parsed for hours).
pub const MAX_KEYWORD_NESTING: usize = 16;

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
        keyword_nesting,
    } = count(&tokens);
    if keyword_nesting > MAX_KEYWORD_NESTING {
        return Err(SqlError::input(format!(
            "the query nests {keyword_nesting} keyword calls such as CAST(…) one inside another, \
             more than the {MAX_KEYWORD_NESTING} dpml parses: split it or drop redundant ones"
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
    /// The deepest nesting of parentheses opened right after a keyword.
    keyword_nesting: usize,
}

/// Counts a query's tokens. Over-counting is safe: a word that only looks like a keyword, or a
/// comma after `FROM` inside a function's arguments, counts too.
fn count(tokens: &[Token]) -> Counts {
    let (mut terms, mut relations) = (0, 0);
    // Per parenthesis level: whether the words so far are in a FROM list, where a comma
    // adds a table, and whether a keyword opened it.
    let mut in_from = vec![false];
    let mut keyword_led = vec![false];
    let (mut keyword_open, mut keyword_nesting) = (0usize, 0usize);
    let mut after_keyword = false;
    for token in tokens {
        match token {
            Token::Whitespace(_) => {}
            Token::LParen => {
                keyword_led.push(after_keyword);
                keyword_open += usize::from(after_keyword);
                keyword_nesting = keyword_nesting.max(keyword_open);
            }
            Token::RParen if keyword_led.len() > 1 => {
                keyword_open -= usize::from(keyword_led.pop().unwrap_or(false));
            }
            _ => {}
        }
        if !matches!(token, Token::Whitespace(_)) {
            after_keyword = matches!(token, Token::Word(w) if w.keyword != Keyword::NoKeyword);
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
        keyword_nesting,
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

    fn keyword_nesting(sql: &str) -> usize {
        count(&Tokenizer::new(&GenericDialect {}, sql).tokenize().unwrap()).keyword_nesting
    }

    #[test]
    fn keyword_calls_count_where_they_nest() {
        assert_eq!(keyword_nesting("SELECT CAST(CAST(x AS INT) AS DOUBLE)"), 2);
        // Side by side, behind plain parentheses or a function's own name: not nested calls.
        assert_eq!(
            keyword_nesting("SELECT CAST(x AS INT), CAST ( y AS INT ) FROM t"),
            1
        );
        assert_eq!(keyword_nesting("SELECT 1 + ((f(g(x))))"), 0);
        assert_eq!(
            keyword_nesting("SELECT SUM(CASE WHEN EXTRACT(YEAR FROM d) > 1 THEN 1 END)"),
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
        // where each level doubled the parse (with SUM's, 18 keyword calls).
        let casts =
            (0..=MAX_KEYWORD_NESTING).fold("x".to_string(), |e, _| format!("CAST({e} AS DOUBLE)"));
        let e = check(
            &format!("SELECT SUM({}{casts}) FROM t", "- ".repeat(18)),
            &GenericDialect {},
        )
        .unwrap_err();
        assert!(
            e.is_input() && e.to_string().contains("nests 18 keyword calls"),
            "{e}"
        );
        assert!(
            check(
                "SELECT COUNT(*) FROM t WHERE 'unterminated",
                &GenericDialect {}
            )
            .is_ok()
        );
    }
}
