//! Expressions on private rows must never fail on a row's value.
//!
//! A query that fails tells the analyst something no noise covers: *some row reached an
//! expression that fails*. `CASE WHEN o_custkey = 42 THEN o_orderkey / 0 END` fails exactly
//! when customer 42 has an order. Such a failure is charged (the engine records the spend
//! before it reads a private row), but the charge only limits how often it can be asked: the
//! answer itself is exact, not noisy. Every expression the rewrite finds on private rows is
//! therefore checked, node by node, against what is known to be total in DataFusion:
//! comparisons, logic, `CASE`, float arithmetic, integer `+ − ×` (which wrap), decimal
//! arithmetic whose result fits 38 digits, division by a non-zero constant, casts that cannot
//! fail (widening, to text but not from a date or time, to DOUBLE, `TRY_CAST`), patterns that
//! compile, text whose length stays bounded, and an allow-list of scalar functions.
//! Anything else is refused before any row is read, with a way to write it that cannot fail
//! (`TRY_CAST`, `CAST(x AS DOUBLE) / y`).

use datafusion::arrow::datatypes::DataType;
use std::sync::Arc;

use datafusion::catalog::TableProvider;
use datafusion::common::Column;
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::common::{DFSchema, ScalarValue};
use datafusion::datasource::source_as_provider;
use datafusion::logical_expr::{Expr, ExprSchemable, JoinType, LogicalPlan, Operator};

/// Decimal128's most digits.
const MAX_DIGITS: i32 = 38;

/// Scalar functions that return a value (or NULL) for every argument value, in time linear in
/// their text. (Not `levenshtein`: its time is the product of its arguments' lengths, so a
/// 64 KiB constant against another, on one unit's rows only, would take seconds on them.)
#[rustfmt::skip]
const TOTAL_FUNCTIONS: &[&str] = &[
    // Conditionals.
    "coalesce", "nullif", "nvl", "nvl2", "greatest", "least",
    // Text.
    "length", "char_length",
    "character_length", "octet_length", "bit_length", "starts_with",
    "ends_with", "strpos", "instr", "reverse", "ascii", "contains", "md5",
    "sha224", "sha256", "sha384", "sha512", "left", "right",
    "find_in_set", "to_hex",
    "pi",
    // Constants of the query, not of a row.
    "now", "current_date", "current_time", "today",
];

/// Functions that are total when their first argument is a DOUBLE (IEEE: NaN and ±∞, never an
/// error), but not on integers or decimals: rounding an integer or a decimal can overflow its
/// type. (`sqrt` fails on a negative DOUBLE and `power` on 0 to a negative power: neither is
/// listed.)
#[rustfmt::skip]
const FLOAT_FUNCTIONS: &[&str] = &[
    "floor", "ceil", "round", "trunc", "signum", "isnan", "iszero", "nanvl", "cbrt", "exp",
    "ln", "log", "log2", "log10", "sin", "cos", "tan", "cot", "asin", "acos", "atan", "atan2",
    "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "degrees", "radians",
];

/// The fields `date_part`/`extract` accept: any other fails on every row it meets.
/// (`date_trunc` is not total: truncating a nanosecond timestamp of 1677 falls before the
/// first one.)
#[rustfmt::skip]
const DATE_PARTS: &[&str] = &[
    "year", "quarter", "month", "week", "day", "hour", "minute", "second", "millisecond",
    "microsecond", "nanosecond", "dow", "doy", "epoch",
];

/// How to do without formatting or converting a date or time.
const FORMAT_DATE: &str = "a date or time out of chrono's range fails to format as text or to \
                           convert to another date or time type, even in TRY_CAST: compare it \
                           as it is, or take its parts (date_part)";

/// At most this many text columns and constants feed one concatenation, and at most this many
/// bytes of constants. Arrow holds a batch's text in one buffer of at most 2 GiB: a value built
/// from thousands of copies of a column, or of a long constant, would overflow it on the rows
/// of one unit alone, and fail exactly when that unit has rows. Within these limits only text
/// data of some 100 MB per batch could.
const MAX_CONCAT_PARTS: usize = 16;
const MAX_CONCAT_CONSTANT_BYTES: usize = 64 * 1024;

/// The most bytes of a set of characters to trim.
const MAX_TRIM_SET: usize = 64;

/// How many times longer, in bytes, a case map or `translate` can make a text.
const CASE_MAP_GROWTH: usize = 4;

/// Why `node` (one node of an expression on private rows, typed in `schema`) could fail on a
/// row's value; None when it cannot. Children are checked as nodes of their own.
pub(crate) fn failure(node: &Expr, schema: &DFSchema) -> Option<(String, String)> {
    let refuse = |what: String, how: &str| {
        Some((
            what,
            format!(
                "it can fail on a row's value, and a query that fails would tell whether such \
                 a row exists; {how}"
            ),
        ))
    };
    // A reason of its own (not a failure on a row's value).
    let refuse_for = |what: String, why: &str| Some((what, why.to_string()));
    let ty = |e: &Expr| e.get_type(schema).ok();
    match node {
        // A longer text constant, given to every row a CASE picks, could fill arrow's 2 GiB
        // text buffer with the rows of one unit (see `MAX_CONCAT_PARTS`).
        Expr::Literal(v, _) if v.size() > MAX_CONCAT_CONSTANT_BYTES => refuse_for(
            format!("a constant of {} bytes", v.size()),
            "on private rows a constant has at most 64 KiB: a longer one, given to the rows of \
             one unit, could overflow arrow's 2 GiB buffers there",
        ),
        // Negating an integer wraps, a float or a decimal cannot overflow; a timestamp or an
        // interval can fail.
        Expr::Negative(e) if !ty(e).is_some_and(|t| t.is_numeric()) => refuse(
            format!("{node}"),
            "only a number is negated on private rows (a negated timestamp or interval can \
             fail)",
        ),
        Expr::Column(_)
        | Expr::Literal(..)
        | Expr::Alias(_)
        | Expr::Not(_)
        | Expr::IsNull(_)
        | Expr::IsNotNull(_)
        | Expr::IsTrue(_)
        | Expr::IsFalse(_)
        | Expr::IsUnknown(_)
        | Expr::IsNotTrue(_)
        | Expr::IsNotFalse(_)
        | Expr::IsNotUnknown(_)
        | Expr::Negative(_)
        | Expr::Between(_)
        | Expr::Case(_)
        | Expr::InList(_)
        | Expr::AggregateFunction(_) => None,
        // NULL for a value that does not convert, except that arrow formats a date or time as
        // text with an error, not NULL, when it is out of chrono's range.
        Expr::TryCast(c) => match ty(&c.expr) {
            Some(from) if try_cast_is_total(&from, c.field.data_type()) => None,
            _ => refuse(
                format!("TRY_CAST({} AS {})", c.expr, c.field.data_type()),
                FORMAT_DATE,
            ),
        },
        Expr::Like(like) if like.escape_char.is_some_and(|c| c != '\\') => refuse(
            format!("{node}"),
            "LIKE takes only the default escape character (a backslash)",
        ),
        Expr::Like(like) => pattern_failure(&like.pattern, Pattern::Like(like.case_insensitive))
            .map(|why| (format!("{node}"), why)),
        Expr::BinaryExpr(b)
            if b.op == Operator::StringConcat && !concatenation_is_bounded(node) =>
        {
            refuse(
                format!("{node}"),
                "concatenate at most 16 columns and constants, with at most 64 KiB of \
                 constants: a longer value could overflow arrow's text buffer on one unit's \
                 rows",
            )
        }
        Expr::BinaryExpr(b) if let Some(kind) = Pattern::of(b.op) => {
            pattern_failure(&b.right, kind).map(|why| (format!("{node}"), why))
        }
        Expr::BinaryExpr(b) => {
            // Fail closed: operands whose types cannot be told are refused.
            let types = ty(&b.left).zip(ty(&b.right));
            let total = types
                .as_ref()
                .is_some_and(|(l, r)| arithmetic_is_total(b.op, l, r, &b.right));
            if total {
                None
            } else {
                let (l, r) = types.map_or(("?".into(), "?".into()), |(l, r)| {
                    (l.to_string(), r.to_string())
                });
                refuse(
                    format!("{node} ({l} {} {r})", b.op),
                    if is_arithmetic(b.op) {
                        "compute it in DOUBLE (CAST(x AS DOUBLE)), whose arithmetic never \
                         fails, and divide only by a non-zero constant otherwise"
                    } else {
                        "this operator is not evaluated on private rows (it can fail on a \
                         row's value); use comparisons, logic, patterns and arithmetic"
                    },
                )
            }
        }
        Expr::Cast(c) => {
            let to = c.field.data_type();
            let from = match &*c.expr {
                Expr::Literal(v, _) if v.cast_to(to).is_ok() => return None,
                e => ty(e),
            };
            if from.as_ref().is_some_and(|from| cast_is_total(from, to)) {
                return None;
            }
            let how = if from.as_ref().is_some_and(|f| formats_with_error(f, to)) {
                FORMAT_DATE
            } else if from.as_ref().is_some_and(DataType::is_string) {
                "use TRY_CAST, which gives NULL for a value that does not convert, or declare \
                 the column's type in the schema (type = \"integer\", \"real\", \"date\", …: a \
                 CSV column without one is text)"
            } else {
                "use TRY_CAST, which gives NULL for a value that does not convert"
            };
            refuse(format!("CAST({} AS {to})", c.expr), how)
        }
        Expr::ScalarFunction(f) => {
            let name = f.func.name().to_ascii_lowercase();
            let literal = |i: usize| match f.args.get(i) {
                Some(Expr::Literal(v, _)) => Some(v.clone()),
                _ => None,
            };
            let text = |v: Option<ScalarValue>| {
                v.and_then(|v| v.try_as_str().flatten().map(str::to_ascii_lowercase))
            };
            // DataFusion searches for a substring that is not a constant by comparing it at
            // every place in the text: time in the product of their lengths. (`instr` and
            // `POSITION … IN` are planned as `strpos`.)
            if name == "strpos" && text_literal(f.args.get(1)).is_none() {
                return refuse_for(
                    format!("{name}() of a substring that is not a constant"),
                    "searching for a substring that is not a constant takes time in the \
                     product of the two texts' lengths, and the query's time would tell whether \
                     a unit has rows with long text: search for a constant substring",
                );
            }
            let total = match name.as_str() {
                n if TOTAL_FUNCTIONS.contains(&n) => true,
                // abs(i64::MIN) fails; floats and decimals cannot.
                "abs" => f.args.first().and_then(ty).is_some_and(|t| !t.is_integer()),
                n if FLOAT_FUNCTIONS.contains(&n) => f
                    .args
                    .first()
                    .and_then(ty)
                    .is_some_and(|t| t.is_floating() || t.is_null()),
                // Of a date or a timestamp: a time, an interval or a duration fails for some
                // fields (the year of a time).
                "date_part" | "datepart" => {
                    text(literal(0)).is_some_and(|p| DATE_PARTS.contains(&p.as_str()))
                        && f.args.get(1).and_then(ty).is_some_and(|t| {
                            matches!(
                                t,
                                DataType::Date32 | DataType::Date64 | DataType::Timestamp(..)
                            )
                        })
                }
                // The set of characters to trim is searched for each one: a long set costs
                // time in the product of the lengths.
                "btrim" | "ltrim" | "rtrim" | "trim" => {
                    f.args.len() == 1
                        || text_literal(f.args.get(1)).is_some_and(|s| s.len() <= MAX_TRIM_SET)
                }
                // Case maps and translate can make text longer (up to 4 bytes for 1): bounded
                // with the concatenations.
                "upper" | "lower" | "initcap" | "translate" => concatenation_is_bounded(node),
                // A start of i64::MIN overflows, and a negative length fails.
                "substr" | "substring" => {
                    f.args
                        .get(1)
                        .is_some_and(|start| start_cannot_overflow(start, schema))
                        && (f.args.len() == 2
                            || literal(2).is_some_and(|v| {
                                v.cast_to(&DataType::Int64).is_ok_and(
                                    |v| matches!(v, ScalarValue::Int64(Some(n)) if n >= 0),
                                )
                            }))
                }
                // Never longer than its input: a constant, non-empty text replaced by one no
                // longer (an empty one is found between every two characters).
                "replace" => {
                    let len = |i: usize| text_literal(f.args.get(i)).map(str::len);
                    len(1)
                        .zip(len(2))
                        .is_some_and(|(from, to)| from > 0 && to <= from)
                }
                "concat" | "concat_ws" => concatenation_is_bounded(node),
                _ => false,
            };
            if total {
                None
            } else {
                refuse(
                    format!("{name}() on private rows"),
                    "dpml allows on private rows only functions that cannot fail (see the \
                     guide's list: substr with a constant start, replace of a constant by one \
                     no longer, concat of at most 16 parts; maths functions take DOUBLE: \
                     CAST(x AS DOUBLE))",
                )
            }
        }
        // Subqueries, windows, grouping sets and UNNEST are refused (or bounded) by the rewrite
        // with their own reasons.
        Expr::ScalarSubquery(_)
        | Expr::InSubquery(_)
        | Expr::Exists(_)
        | Expr::WindowFunction(_)
        | Expr::GroupingSet(_)
        | Expr::Unnest(_) => None,
        Expr::SetComparison(_) => refuse_for(
            format!("{node}"),
            "a comparison with ANY or ALL of a subquery is not supported: write it with \
             IN (subquery) or EXISTS",
        ),
        other => refuse(
            format!("{other}"),
            "dpml allows on private rows only expressions that cannot fail",
        ),
    }
}

/// Why an aggregate that DataFusion evaluates per unit (a subquery grouped by the unit, or by
/// a foreign key that reaches it, whose rows stay private) could fail on the unit's values or
/// depend on other units' rows; None when it can do neither.
///
/// # Privacy
/// A per-unit value must be a function of the unit's own rows. Counts, MIN, MAX and the
/// boolean aggregates are; so is a SUM of integers or decimals (DataFusion's integer and
/// decimal sums wrap, and wrapping addition is exact in any order). A floating-point SUM is
/// not: DataFusion adds a group's rows batch by batch and partition by partition, and which
/// rows share a batch moves when another unit's rows are added or removed, so the rounding of
/// every later unit's sum, and any comparison on it, changes. AVG sums in floating point (of
/// a DECIMAL, with checked arithmetic that can fail), and the other aggregates are not known
/// to be exact and total.
pub(crate) fn per_unit_failure(aggregate: &Expr, schema: &DFSchema) -> Option<(String, String)> {
    let Expr::AggregateFunction(f) = crate::aggregate::strip_alias(aggregate) else {
        return None;
    };
    let name = f.func.name().to_ascii_lowercase();
    // Fail closed: an argument whose type cannot be told counts as a float.
    let exact_sum = f
        .params
        .args
        .first()
        .and_then(|a| a.get_type(schema).ok())
        .is_some_and(|t| t.is_integer() || t.is_decimal());
    let reason = match name.as_str() {
        "count" | "min" | "max" | "bool_and" | "bool_or" => return None,
        "sum" if exact_sum => return None,
        "sum" => {
            "a floating-point sum depends on how the engine splits the rows into batches, which \
             other units' rows change, so it would not be a function of the unit's own rows; \
             per unit, sum integers or decimals (SUM(x) with x BIGINT or DECIMAL)"
        }
        "avg" | "mean" => {
            "AVG sums in floating point (of a DECIMAL, with arithmetic that can fail), so it \
             would not be a function of the unit's own rows; per unit, write SUM(x) and \
             COUNT(x) of an integer or DECIMAL x"
        }
        _ => {
            "it can fail on a unit's values, and a query that fails would tell whether such a \
             unit exists; per unit, dpml allows COUNT, MIN, MAX, and SUM of integers or \
             decimals"
        }
    };
    Some((
        format!("{aggregate} in a subquery grouped by the privacy unit"),
        reason.to_string(),
    ))
}

/// A regular expression from `~` (case-insensitive or not), or a LIKE pattern.
#[derive(Debug, Clone, Copy)]
enum Pattern {
    Regex(bool),
    Like(bool),
}

impl Pattern {
    /// The pattern an operator matches its right side as, if any (`~~` is LIKE).
    fn of(op: Operator) -> Option<Self> {
        use Operator::*;
        match op {
            RegexMatch | RegexNotMatch => Some(Self::Regex(false)),
            RegexIMatch | RegexNotIMatch => Some(Self::Regex(true)),
            LikeMatch | NotLikeMatch => Some(Self::Like(false)),
            ILikeMatch | NotILikeMatch => Some(Self::Like(true)),
            _ => None,
        }
    }
}

/// The most bytes a pattern may take compiled (the regex crate's measure). Arrow compiles a
/// pattern again for each batch of rows that meets it (about 3.5 ns a compiled byte), and
/// only once a row meets it: `user_id = 42 AND name ~ '\w{200}'` (16 MiB, 55 ms) would take
/// that long only on a batch holding a row of unit 42. A pattern's compiling counts in the
/// work bound too (see [`composed_text`]).
const MAX_PATTERN_BYTES: usize = 1 << 20;

/// What a compiled byte of pattern counts as in the work bound: compiling takes some three
/// times as long as hashing a byte.
const PATTERN_WORK_PER_BYTE: usize = 4;

/// Why the pattern `pattern` of `kind` cannot be matched on private rows; None if it can: a
/// constant text that arrow compiles (the same kernel the engine runs, on one empty string,
/// so that a pattern it cannot compile fails here and not on a row) and that compiles within
/// [`MAX_PATTERN_BYTES`].
fn pattern_failure(pattern: &Expr, kind: Pattern) -> Option<String> {
    use datafusion::arrow::array::{Scalar, StringArray};
    use datafusion::arrow::compute::kernels::comparison::{ilike, like, regexp_is_match_scalar};
    let Some(p) = text_literal(Some(pattern)) else {
        return Some(
            "match a constant pattern (arrow compiles it when a row first meets it)".into(),
        );
    };
    // Before compiling it: folding is what makes such a pattern slow to compile.
    let folded = folded_chars(p, kind);
    if folded.saturating_mul(FOLD_WORK_PER_CHAR) as u64 > crate::public_side::MAX_WORK_BYTES {
        return Some(format!(
            "matched without regard to case, its classes hold {folded} characters to \
             case-fold, and arrow folds them again for each batch of rows that meets it: the \
             query's time would tell whether a unit has rows (use ASCII classes such as \
             [a-z], or match with regard to case)"
        ));
    }
    let row = StringArray::from(vec![""]);
    let text = Scalar::new(StringArray::from(vec![p]));
    let compiles = match kind {
        Pattern::Regex(insensitive) => {
            regexp_is_match_scalar(&row, p, insensitive.then_some("i")).is_ok()
        }
        Pattern::Like(false) => like(&row, &text).is_ok(),
        Pattern::Like(true) => ilike(&row, &text).is_ok(),
    };
    if !compiles {
        return Some(
            "match a pattern that compiles (arrow compiles it when a row first meets it, and a \
             pattern too large for its limits fails there)"
                .into(),
        );
    }
    match pattern_bytes(p, kind) {
        Some(_) => None,
        None => Some(format!(
            "the pattern compiles to more than {} KiB, and arrow compiles it again for each \
             batch of rows that meets it: the query's time would tell whether a unit has rows \
             (use a smaller pattern: ASCII classes such as [a-z0-9_] instead of \\w, fewer \
             repetitions)",
            MAX_PATTERN_BYTES / 1024
        )),
    }
}

/// The bytes `pattern` of `kind` takes compiled, as the smallest power of two from 1 KiB that
/// the regex crate compiles it within; None above [`MAX_PATTERN_BYTES`] (or for a pattern the
/// regex crate does not compile). A LIKE pattern is measured as the regular expression arrow
/// turns it into (one without wildcards arrow compares directly: an upper bound).
fn pattern_bytes(pattern: &str, kind: Pattern) -> Option<usize> {
    let (regex, insensitive) = match kind {
        Pattern::Regex(insensitive) => (pattern.to_string(), insensitive),
        Pattern::Like(insensitive) => (like_regex(pattern), insensitive),
    };
    let mut limit = 1024;
    while limit <= MAX_PATTERN_BYTES {
        let built = regex::RegexBuilder::new(&regex)
            .case_insensitive(insensitive)
            .dot_matches_new_line(true)
            .size_limit(limit)
            .build();
        match built {
            Ok(_) => return Some(limit),
            Err(regex::Error::CompiledTooBig(_)) => limit *= 2,
            Err(_) => return None,
        }
    }
    None
}

/// The regular expression of a LIKE pattern (escape character `\`).
fn like_regex(pattern: &str) -> String {
    let mut out = String::from("^");
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        match c {
            '%' => out.push_str(".*"),
            '_' => out.push('.'),
            '\\' => {
                if let Some(next) = chars.next() {
                    out.push_str(&regex::escape(&next.to_string()));
                }
            }
            c => out.push_str(&regex::escape(&c.to_string())),
        }
    }
    out.push('$');
    out
}

/// The work a pattern-matching node does on a row: compiling its pattern (arrow compiles it
/// again for each batch; its compiled bytes weighted by [`PATTERN_WORK_PER_BYTE`], and its
/// case folding, see [`folded_chars`]) and matching it against the text that reaches it,
/// whose time is the product of the compiled size and the text's length where the regex
/// crate's lazy DFA gives up ([`MATCH_WORK_DIVISOR`]). `text` gives the (parts, bytes of
/// constants and public text) of an expression; each private part counts as
/// [`PRIVATE_TEXT_ALLOWANCE`] bytes. 0 for other nodes.
fn pattern_work(node: &Expr, text: &dyn Fn(&Expr) -> (usize, usize)) -> usize {
    let (subject, pattern, kind) = match node {
        Expr::Like(like) => (
            &*like.expr,
            &*like.pattern,
            Pattern::Like(like.case_insensitive),
        ),
        Expr::BinaryExpr(b) => match Pattern::of(b.op) {
            Some(kind) => (&*b.left, &*b.right, kind),
            None => return 0,
        },
        _ => return 0,
    };
    let Some(p) = text_literal(Some(pattern)) else {
        return 0;
    };
    let Some(bytes) = pattern_bytes(p, kind) else {
        return 0;
    };
    let (parts, constant_bytes) = text(subject);
    let subject_bytes = constant_bytes.saturating_add(parts.saturating_mul(PRIVATE_TEXT_ALLOWANCE));
    let folding = folded_chars(p, kind).saturating_mul(FOLD_WORK_PER_CHAR);
    let literals = literal_set_bytes(p, kind).saturating_mul(LITERAL_WORK_PER_BYTE);
    bytes
        .saturating_mul(PATTERN_WORK_PER_BYTE)
        .saturating_add(folding)
        .saturating_add(literals)
        .saturating_add(bytes.saturating_mul(subject_bytes) / MATCH_WORK_DIVISOR)
}

/// Matching: a compiled byte against a byte of text counts as this fraction of a byte of work.
/// Where its lazy DFA gives up (`a[ab]{8000}c` over a/b text), the regex crate steps through
/// the compiled pattern for each byte of text: 1 MiB compiled against 60 KB took 1.2 s here,
/// some 60 compiled-byte × text-byte products for the time of one byte of hashing.
const MATCH_WORK_DIVISOR: usize = 32;

/// The length a private text is counted as where a pattern matches it. Its own time is the
/// unit's, but the pattern multiplies it (see [`MATCH_WORK_DIVISOR`]).
const PRIVATE_TEXT_ALLOWANCE: usize = 64;

/// A byte of a set of literals, as work: for a pattern that is a set of literals (`a|b|c`,
/// or a class cross product such as `[a-j][a-e][a-e]` and a long text) the regex crate builds
/// an Aho-Corasick automaton and no compiled pattern to measure; 250 literals of 100 bytes
/// took some 20 ms to build, for each batch.
const LITERAL_WORK_PER_BYTE: usize = 1024;

/// The bytes of the literal sets the regex crate may build an automaton of for `pattern` of
/// `kind`: the prefixes or suffixes it extracts (as many as its limits allow), and the
/// literals of each alternation of literals (of any length). 0 for a pattern it does not parse.
fn literal_set_bytes(pattern: &str, kind: Pattern) -> usize {
    use regex_syntax::hir::literal::{ExtractKind, Extractor};
    use regex_syntax::hir::{Hir, HirKind};
    let (regex, insensitive) = match kind {
        Pattern::Regex(insensitive) => (pattern.to_string(), insensitive),
        Pattern::Like(insensitive) => (like_regex(pattern), insensitive),
    };
    let Ok(hir) = regex_syntax::ParserBuilder::new()
        .case_insensitive(insensitive)
        .dot_matches_new_line(true)
        .build()
        .parse(&regex)
    else {
        return 0;
    };
    let extracted = |kind: ExtractKind| {
        let mut extractor = Extractor::new();
        extractor.kind(kind);
        extractor
            .extract(&hir)
            .literals()
            .map_or(0, |ls| ls.iter().map(|l| l.as_bytes().len()).sum::<usize>())
    };
    fn uncaptured(h: &Hir) -> &Hir {
        match h.kind() {
            HirKind::Capture(c) => uncaptured(&c.sub),
            _ => h,
        }
    }
    fn alternations(h: &Hir) -> usize {
        let own = match h.kind() {
            HirKind::Alternation(alts) => alts
                .iter()
                .map(|a| match uncaptured(a).kind() {
                    HirKind::Literal(l) => l.0.len(),
                    _ => 0,
                })
                .sum(),
            _ => 0,
        };
        let below: usize = match h.kind() {
            HirKind::Alternation(subs) | HirKind::Concat(subs) => {
                subs.iter().map(alternations).sum()
            }
            HirKind::Capture(c) => alternations(&c.sub),
            HirKind::Repetition(r) => alternations(&r.sub),
            _ => 0,
        };
        own.saturating_add(below)
    }
    extracted(ExtractKind::Prefix)
        .max(extracted(ExtractKind::Suffix))
        .max(alternations(&hir))
}

/// Case folding a character of a class, as work: folding all of Unicode (1.1 million
/// characters) takes some 15 ms here, about 12 bytes of hashing per character.
const FOLD_WORK_PER_CHAR: usize = 16;

/// An upper bound on the characters that compiling `pattern` of `kind` case-folds: 0 unless
/// it matches case-insensitively (the operator, or an `i` flag anywhere in it). The regex
/// crate folds each class of a case-insensitive pattern, then each side of a set operation
/// and each bracket around it again: an item counts once for itself and once per bracket or
/// set operation around it. Folding time is not in the compiled size: `[\p{Any}--\p{Any}]`
/// folds all of Unicode twice and compiles to nothing. A pattern the parser refuses counts
/// 0 (it is refused as one that does not compile).
fn folded_chars(pattern: &str, kind: Pattern) -> usize {
    use regex_syntax::ast::{Ast, Flag, FlagsItemKind, GroupKind, Visitor, parse::Parser, visit};
    let Pattern::Regex(insensitive) = kind else {
        // A LIKE pattern has no classes: its `_` is any character, not folded.
        return 0;
    };
    let Ok(ast) = Parser::new().parse(pattern) else {
        return 0;
    };
    struct Count {
        insensitive: bool,
        chars: usize,
    }
    impl Visitor for Count {
        type Output = usize;
        type Err = ();
        fn finish(self) -> Result<usize, ()> {
            Ok(if self.insensitive { self.chars } else { 0 })
        }
        fn visit_pre(&mut self, ast: &Ast) -> Result<(), ()> {
            let flags = match ast {
                Ast::Flags(f) => Some(&f.flags),
                Ast::Group(g) => match &g.kind {
                    GroupKind::NonCapturing(f) => Some(f),
                    _ => None,
                },
                _ => None,
            };
            if flags.is_some_and(|f| {
                f.items
                    .iter()
                    .any(|i| i.kind == FlagsItemKind::Flag(Flag::CaseInsensitive))
            }) {
                self.insensitive = true;
            }
            self.chars = self.chars.saturating_add(class_chars(ast));
            Ok(())
        }
    }
    let count = Count {
        insensitive,
        chars: 0,
    };
    visit(&ast, count).unwrap_or(0)
}

/// The characters a class node (an item outside brackets, or a bracketed class) has folded,
/// counted as [`folded_chars`] says; 0 for other nodes.
fn class_chars(ast: &regex_syntax::ast::Ast) -> usize {
    use regex_syntax::ast::{Ast, ClassSet, ClassSetItem};
    // The characters of an item in its positive form (folding comes before negation).
    fn item(i: &ClassSetItem, levels: usize) -> usize {
        let chars = match i {
            ClassSetItem::Empty(_) => 0,
            ClassSetItem::Ascii(_) => 128,
            ClassSetItem::Literal(_) => 1,
            ClassSetItem::Range(r) => (r.end.c as usize).saturating_sub(r.start.c as usize) + 1,
            ClassSetItem::Unicode(c) => positive_unicode(c),
            ClassSetItem::Perl(c) => positive_perl(c),
            ClassSetItem::Bracketed(b) => return set(&b.kind, levels + 1),
            ClassSetItem::Union(u) => {
                return u
                    .items
                    .iter()
                    .map(|i| item(i, levels))
                    .fold(0, usize::saturating_add);
            }
        };
        chars.saturating_mul(levels + 1)
    }
    fn set(s: &ClassSet, levels: usize) -> usize {
        match s {
            ClassSet::Item(i) => item(i, levels),
            ClassSet::BinaryOp(op) => {
                set(&op.lhs, levels + 1).saturating_add(set(&op.rhs, levels + 1))
            }
        }
    }
    match ast {
        Ast::ClassUnicode(c) => positive_unicode(c),
        Ast::ClassPerl(c) => positive_perl(c),
        Ast::ClassBracketed(b) => set(&b.kind, 1),
        _ => 0,
    }
}

/// The characters of a Unicode class (`\p{…}`) without its negation.
fn positive_unicode(c: &regex_syntax::ast::ClassUnicode) -> usize {
    use regex_syntax::ast::{Ast, ClassUnicodeKind, ClassUnicodeOpKind};
    let mut c = c.clone();
    c.negated = false;
    if let ClassUnicodeKind::NamedValue { op, .. } = &mut c.kind {
        *op = ClassUnicodeOpKind::Equal;
    }
    chars_of(&Ast::class_unicode(c))
}

/// The characters of a Perl class (`\w`, `\d`, `\s`) without its negation.
fn positive_perl(c: &regex_syntax::ast::ClassPerl) -> usize {
    let mut c = c.clone();
    c.negated = false;
    chars_of(&regex_syntax::ast::Ast::class_perl(c))
}

/// The characters a class matches in Unicode mode (all of Unicode if it cannot be told).
fn chars_of(ast: &regex_syntax::ast::Ast) -> usize {
    const ALL: usize = 0x11_0000;
    let mut text = String::new();
    if regex_syntax::ast::print::Printer::new()
        .print(ast, &mut text)
        .is_err()
    {
        return ALL;
    }
    match regex_syntax::Parser::new()
        .parse(&text)
        .map(|h| h.into_kind())
    {
        Ok(regex_syntax::hir::HirKind::Class(regex_syntax::hir::Class::Unicode(c))) => c
            .ranges()
            .iter()
            .map(|r| (r.end() as usize) - (r.start() as usize) + 1)
            .sum(),
        _ => ALL,
    }
}

/// The text of a non-NULL text constant.
fn text_literal(e: Option<&Expr>) -> Option<&str> {
    match e? {
        Expr::Literal(v, _) => v.try_as_str().flatten(),
        _ => None,
    }
}

/// The bytes of a text or binary constant (0 for others: numbers and dates are short).
fn literal_bytes(v: &ScalarValue) -> usize {
    match v {
        ScalarValue::Binary(Some(b))
        | ScalarValue::LargeBinary(Some(b))
        | ScalarValue::BinaryView(Some(b))
        | ScalarValue::FixedSizeBinary(_, Some(b)) => b.len(),
        ScalarValue::Dictionary(_, v) => literal_bytes(v),
        v => v.try_as_str().flatten().map_or(0, str::len),
    }
}

/// Whether a `substr` start is never i64::MIN (where DataFusion's start − 1 overflows): a
/// constant other than it, or a narrower integer widened.
fn start_cannot_overflow(start: &Expr, schema: &DFSchema) -> bool {
    let narrow = |e: &Expr| {
        e.get_type(schema)
            .is_ok_and(|t| int_range(&t).is_some_and(|(lo, _)| lo > i128::from(i64::MIN)))
    };
    match start {
        Expr::Literal(v, _) => matches!(
            v.cast_to(&DataType::Int64),
            Ok(ScalarValue::Int64(Some(n))) if n != i64::MIN
        ),
        Expr::Cast(c) => narrow(&c.expr),
        e => narrow(e),
    }
}

/// Whether the text that `node` builds is bounded (see [`MAX_CONCAT_PARTS`]): the columns and
/// constants under it, counted with `concat_ws`'s separator once per gap and times
/// [`CASE_MAP_GROWTH`] under each case map or `translate`, and their bytes.
fn concatenation_is_bounded(node: &Expr) -> bool {
    let (parts, bytes) = text_parts(node);
    parts <= MAX_CONCAT_PARTS && bytes <= MAX_CONCAT_CONSTANT_BYTES
}

/// (parts, constant bytes) of the text `e` can build, as [`concatenation_is_bounded`] counts
/// them (saturating: a count past the limits is refused anyway), a column as one part.
fn text_parts(e: &Expr) -> (usize, usize) {
    text_parts_with(e, &|_| (1, 0))
}

/// [`text_parts`], a column counted as `column` says (what it was built from, below).
fn text_parts_with(e: &Expr, column: &dyn Fn(&Column) -> (usize, usize)) -> (usize, usize) {
    let add =
        |(p, b): (usize, usize), (q, c): (usize, usize)| (p.saturating_add(q), b.saturating_add(c));
    let parts = |e: &Expr| text_parts_with(e, column);
    let sum = |args: &[Expr]| args.iter().map(parts).fold((0, 0), add);
    let times = |(p, b): (usize, usize), k: usize| (p.saturating_mul(k), b.saturating_mul(k));
    match e {
        Expr::Column(c) => column(c),
        Expr::Literal(v, _) => (1, literal_bytes(v)),
        Expr::ScalarFunction(f) => match f.func.name() {
            "concat" => sum(&f.args),
            "concat_ws" => match f.args.split_first() {
                // The separator goes between every two of the other arguments.
                Some((sep, rest)) => {
                    add(sum(rest), times(parts(sep), rest.len().saturating_sub(1)))
                }
                None => (0, 0),
            },
            "upper" | "lower" | "initcap" | "translate" => {
                times(sum(&f.args[..f.args.len().min(1)]), CASE_MAP_GROWTH)
            }
            _ => sum(&f.args),
        },
        Expr::BinaryExpr(b) if b.op == Operator::StringConcat => {
            add(parts(&b.left), parts(&b.right))
        }
        // Every other expression: what its parts can build, added up (conservative: a CASE
        // builds one branch, a comparison no text at all).
        e => {
            let mut out = (0, 0);
            let _ = e.apply_children(|c| {
                out = add(out, parts(c));
                Ok(TreeNodeRecursion::Continue)
            });
            out
        }
    }
}

/// Why text built across the nodes of `plan` (private rows) could grow past the limits of
/// [`MAX_CONCAT_PARTS`], as the error. Each expression is checked on its own by
/// [`failure`], a column as one part; but a subquery's column built from 16 parts,
/// concatenated 16 times above, holds 256, and k levels 16^k. So each column is counted as
/// the parts it was built from, through every node below, and every concatenation is checked
/// with its columns counted so.
/// A stored public side's column counts as one part with its longest value's bytes, as a
/// constant would (`longest` gives them, by table and column).
///
/// Otherwise returns the bytes of constants and public values that the plan's expressions
/// work through for one row: each operation counts the bytes of such text in its arguments
/// (`length(md5(x || c))` counts `c` three times). Private values are not counted: the time
/// they take is the unit's own.
pub(crate) fn composed_text(
    plan: &LogicalPlan,
    longest: &Longest<'_>,
) -> std::result::Result<usize, (String, String)> {
    let mut work = 0;
    column_parts(plan, longest, &mut work)?;
    Ok(work)
}

/// The longest value of a column of a stored table, if the table is one.
pub(crate) type Longest<'a> = dyn Fn(&Arc<dyn TableProvider>, usize) -> Option<usize> + 'a;

/// (parts, constant bytes) of each output column of `plan`, and the work of its expressions
/// added to `work` (see [`composed_text`]).
fn column_parts(
    plan: &LogicalPlan,
    longest: &Longest<'_>,
    work: &mut usize,
) -> Result<Vec<(usize, usize)>, (String, String)> {
    if let LogicalPlan::TableScan(scan) = plan
        && let Ok(table) = source_as_provider(&scan.source)
    {
        let n = plan.schema().fields().len();
        let columns: Vec<usize> = match &scan.projection {
            Some(p) => p.clone(),
            None => (0..n).collect(),
        };
        return Ok(columns
            .into_iter()
            .map(|c| (1, longest(&table, c).unwrap_or(0)))
            .collect());
    }
    let inputs = plan.inputs();
    let input_parts = inputs
        .iter()
        .map(|p| column_parts(p, longest, work))
        .collect::<Result<Vec<_>, _>>()?;
    let column = |c: &Column| {
        inputs
            .iter()
            .zip(&input_parts)
            .find_map(|(p, parts)| p.schema().index_of_column(c).ok().map(|i| parts[i]))
            .unwrap_or((1, 0))
    };
    for e in plan.expressions() {
        let mut failure = None;
        let _ = e.apply(|node| {
            let concatenates = matches!(node, Expr::BinaryExpr(b) if b.op == Operator::StringConcat)
                || matches!(node, Expr::ScalarFunction(f)
                    if matches!(f.func.name(), "concat" | "concat_ws"));
            let (parts, bytes) = text_parts_with(node, &column);
            *work = work.saturating_add(pattern_work(node, &|e| text_parts_with(e, &column)));
            if works_through_text(node) {
                // What it reads: every argument's text (`translate` reads its two sets for
                // each row, though its result is as long as its first argument).
                let _ = node.apply_children(|c| {
                    *work = work.saturating_add(text_parts_with(c, &column).1);
                    Ok(TreeNodeRecursion::Continue)
                });
            }
            if concatenates && (parts > MAX_CONCAT_PARTS || bytes > MAX_CONCAT_CONSTANT_BYTES) {
                failure = Some((
                    format!("{node}"),
                    format!(
                        "with the text its columns were built from below (in subqueries), it \
                         concatenates {parts} columns and constants, with {bytes} bytes of \
                         constants; at most {MAX_CONCAT_PARTS}, with 64 KiB of constants, may \
                         meet: a longer value could overflow arrow's text buffer on one unit's \
                         rows"
                    ),
                ));
                return Ok(TreeNodeRecursion::Stop);
            }
            Ok(TreeNodeRecursion::Continue)
        });
        if let Some(f) = failure {
            return Err(f);
        }
    }
    let n = plan.schema().fields().len();
    let one = |i: usize| input_parts.get(i).cloned().unwrap_or_default();
    let mut out: Vec<(usize, usize)> = match plan {
        LogicalPlan::Projection(p) => p.expr.iter().map(|e| text_parts_with(e, &column)).collect(),
        // An aggregate's value (MIN or MAX of a text) is as long as its argument.
        LogicalPlan::Aggregate(a) => a
            .group_expr
            .iter()
            .chain(&a.aggr_expr)
            .map(|e| text_parts_with(e, &column))
            .collect(),
        // A semi- or anti-join passes one side on (a left one, the first columns).
        LogicalPlan::Join(j)
            if matches!(
                j.join_type,
                JoinType::RightSemi | JoinType::RightAnti | JoinType::RightMark
            ) =>
        {
            one(1)
        }
        LogicalPlan::Join(_) => one(0).into_iter().chain(one(1)).collect(),
        LogicalPlan::Union(_) => (0..n)
            .map(|i| {
                input_parts
                    .iter()
                    .filter_map(|p| p.get(i))
                    .fold((1, 0), |a, &b| (a.0.max(b.0), a.1.max(b.1)))
            })
            .collect(),
        // Nodes that pass their input's columns on, in order, and maybe add some.
        _ if inputs.len() == 1 => one(0),
        _ => Vec::new(),
    };
    // Columns a node adds of its own count as one part.
    out.resize(n, (1, 0));
    Ok(out)
}

/// Whether `node` reads through the text that reaches it: a function, a pattern match, a
/// comparison, a list lookup (not arithmetic or logic, whose operands are numbers or truth
/// values: a sum of `length(…)` calls reads no text of its own).
fn works_through_text(node: &Expr) -> bool {
    use Operator::*;
    match node {
        Expr::ScalarFunction(_) | Expr::Like(_) | Expr::SimilarTo(_) | Expr::InList(_) => true,
        Expr::BinaryExpr(b) => !matches!(
            b.op,
            And | Or
                | Plus
                | Minus
                | Multiply
                | Divide
                | Modulo
                | BitwiseAnd
                | BitwiseOr
                | BitwiseXor
                | BitwiseShiftLeft
                | BitwiseShiftRight
        ),
        _ => false,
    }
}

/// Whether TRY_CAST from `from` to `to` gives a value or NULL for every value: not for a date
/// or time to text or to another date or time type (arrow converts through chrono, which
/// fails, not NULL, out of its range), nor for lists and other nested values.
fn try_cast_is_total(from: &DataType, to: &DataType) -> bool {
    let from = match from {
        DataType::Dictionary(_, values) => values.as_ref(),
        f => f,
    };
    let fails = formats_with_error(from, to)
        || (from.is_temporal() && to.is_temporal() && from != to)
        || from.is_nested()
        || to.is_nested();
    !fails
}

/// Whether arrow's cast from `from` to `to` can fail on a value even as TRY_CAST: dates and
/// times formatted as text (chrono cannot format every value their integers can hold).
fn formats_with_error(from: &DataType, to: &DataType) -> bool {
    use DataType::*;
    let from = match from {
        Dictionary(_, values) => values.as_ref(),
        f => f,
    };
    to.is_string() && from.is_temporal()
}

/// Whether `op` is + − × ÷ or %, whose totality depends on its operands' types.
fn is_arithmetic(op: Operator) -> bool {
    use Operator::*;
    matches!(op, Plus | Minus | Multiply | Divide | Modulo)
}

/// Whether `l op r` evaluates without an error for every pair of values of its types.
fn arithmetic_is_total(op: Operator, l: &DataType, r: &DataType, right: &Expr) -> bool {
    use Operator::*;
    match op {
        _ if is_arithmetic(op) => {}
        // Shifts and bitwise operators wrap; comparisons, logic and text cannot fail
        // (patterns are checked by `pattern_failure`).
        Eq | NotEq | Lt | LtEq | Gt | GtEq | And | Or | IsDistinctFrom | IsNotDistinctFrom
        | BitwiseAnd | BitwiseOr | BitwiseXor | BitwiseShiftRight | BitwiseShiftLeft
        | StringConcat | RegexMatch | RegexIMatch | RegexNotMatch | RegexNotIMatch | LikeMatch
        | ILikeMatch | NotLikeMatch | NotILikeMatch => return true,
        // Containment, JSON and the like (`@>`, `<@`, `@@`, `->`, `?`, …): DataFusion plans
        // some on any type and fails when a row reaches them; none is needed on private rows.
        _ => return false,
    }
    if l.is_floating() || r.is_floating() {
        // IEEE arithmetic: ±∞ and NaN, never an error (a DECIMAL operand becomes a DOUBLE).
        return true;
    }
    if op == Minus && *l == DataType::Date32 && *r == DataType::Date32 {
        // Days between two dates, as an Int64.
        return true;
    }
    if l.is_integer() && r.is_integer() {
        return match op {
            // Integer + − × wrap in DataFusion (no overflow error).
            Plus | Minus | Multiply => true,
            // x / 0 fails, and so does i64::MIN / −1.
            _ => nonzero_literal(right, false),
        };
    }
    let (Some((p1, s1)), Some((p2, s2))) = (decimal(l), decimal(r)) else {
        // Dates, times, intervals: their arithmetic can overflow.
        return false;
    };
    // arrow's decimal kernels check 128-bit overflow (arrow-arith `decimal_op`): the integer
    // they compute must stay within 38 digits.
    match op {
        Plus | Minus => s1.max(s2) + (p1 - s1).max(p2 - s2) < MAX_DIGITS,
        Multiply => p1 + p2 <= MAX_DIGITS && s1 + s2 <= MAX_DIGITS,
        Divide => {
            let shift = (s1 + 4).min(MAX_DIGITS) - s1 + s2;
            nonzero_literal(right, true) && p1 + shift.max(0) <= MAX_DIGITS
        }
        _ => nonzero_literal(right, true) && s1.max(s2) + (p1 - s1).max(p2 - s2) < MAX_DIGITS,
    }
}

/// Precision and scale of a decimal type (an integer type as the decimal it is coerced to).
fn decimal(t: &DataType) -> Option<(i32, i32)> {
    match t {
        DataType::Decimal128(p, s) => Some((i32::from(*p), i32::from(*s))),
        t => int_digits(t).map(|d| (d, 0)),
    }
}

/// A literal divisor that cannot fail: non-zero and, for integers, not −1 (i64::MIN / −1).
fn nonzero_literal(e: &Expr, decimal: bool) -> bool {
    // A cast literal divides by its value after the cast (CAST(0.5 AS BIGINT) is 0).
    let v = match e {
        Expr::Literal(v, _) => v.clone(),
        Expr::Cast(c) => match &*c.expr {
            Expr::Literal(v, _) => match v.cast_to(c.field.data_type()) {
                Ok(v) => v,
                Err(_) => return false,
            },
            _ => return false,
        },
        _ => return false,
    };
    if v.is_null() {
        // Dividing by NULL gives NULL.
        return true;
    }
    match v.cast_to(&DataType::Float64) {
        Ok(ScalarValue::Float64(Some(x))) => x != 0.0 && (decimal || x != -1.0),
        _ => false,
    }
}

/// Decimal digits that hold every value of an integer type.
fn int_digits(t: &DataType) -> Option<i32> {
    Some(match t {
        DataType::Int8 | DataType::UInt8 => 3,
        DataType::Int16 | DataType::UInt16 => 5,
        DataType::Int32 | DataType::UInt32 => 10,
        DataType::Int64 => 19,
        DataType::UInt64 => 20,
        _ => return None,
    })
}

/// Whether casting any value of `from` to `to` succeeds.
fn cast_is_total(from: &DataType, to: &DataType) -> bool {
    use DataType::*;
    if from == to || from.is_null() {
        return true;
    }
    if let Dictionary(_, values) = from {
        return cast_is_total(values, to);
    }
    match (from, to) {
        // Text from anything but bytes (which need not be UTF-8) and dates and times (see
        // `formats_with_error`).
        (f, Utf8 | LargeUtf8 | Utf8View) => {
            !matches!(f, Binary | LargeBinary | BinaryView)
                && !formats_with_error(f, to)
                && !f.is_nested()
        }
        // Numbers and booleans to floating point: rounding, never an error.
        (f, Float32 | Float64) => f.is_numeric() || *f == Boolean,
        (Boolean, t) => t.is_integer(),
        (f, t) if f.is_integer() && t.is_integer() => int_range(f)
            .zip(int_range(t))
            .is_some_and(|((a, b), (c, d))| c <= a && b <= d),
        (f, Decimal128(p, s)) if f.is_integer() => {
            int_digits(f).is_some_and(|d| d + i32::from(*s) <= i32::from(*p))
        }
        (Decimal128(p1, s1), Decimal128(p2, s2)) => {
            let (whole1, whole2) = (
                i32::from(*p1) - i32::from(*s1),
                i32::from(*p2) - i32::from(*s2),
            );
            // Dropping digits of the scale rounds, and rounding can carry into a new digit.
            if s2 >= s1 {
                whole1 <= whole2
            } else {
                whole1 < whole2
            }
        }
        (Date32, Date64) => true,
        _ => false,
    }
}

/// The range of an integer type.
fn int_range(t: &DataType) -> Option<(i128, i128)> {
    use DataType::*;
    Some(match t {
        Int8 => (i8::MIN.into(), i8::MAX.into()),
        Int16 => (i16::MIN.into(), i16::MAX.into()),
        Int32 => (i32::MIN.into(), i32::MAX.into()),
        Int64 => (i64::MIN.into(), i64::MAX.into()),
        UInt8 => (0, u8::MAX.into()),
        UInt16 => (0, u16::MAX.into()),
        UInt32 => (0, u32::MAX.into()),
        UInt64 => (0, u64::MAX.into()),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn casts_that_cannot_fail_are_told_apart() {
        use DataType::*;
        assert!(cast_is_total(&Int32, &Int64));
        assert!(!cast_is_total(&Int64, &Int8));
        assert!(!cast_is_total(&Int64, &UInt64));
        assert!(cast_is_total(&Utf8, &Utf8View));
        assert!(!cast_is_total(&Utf8, &Int64));
        assert!(cast_is_total(&Decimal128(15, 2), &Float64));
        assert!(!cast_is_total(&Float64, &Int64));
        assert!(cast_is_total(&Int64, &Decimal128(20, 0)));
        assert!(!cast_is_total(&Int64, &Decimal128(20, 2)));
        assert!(cast_is_total(&Decimal128(15, 2), &Decimal128(38, 10)));
        // 99.99 rounds to 100, which Decimal(2, 0) cannot hold.
        assert!(!cast_is_total(&Decimal128(4, 2), &Decimal128(2, 0)));
        assert!(!cast_is_total(
            &Date32,
            &Timestamp(datafusion::arrow::datatypes::TimeUnit::Nanosecond, None)
        ));
    }

    #[test]
    fn case_folding_is_counted_before_negation_and_set_operations() {
        let all = 0x11_0000;
        let regex = Pattern::Regex(false);
        let insensitive = Pattern::Regex(true);
        assert_eq!(folded_chars(r"\p{Any}", regex), 0, "not folded");
        assert_eq!(folded_chars(r"\p{Any}", insensitive), all);
        assert_eq!(
            folded_chars(r"(?i)\P{Any}", regex),
            all,
            "folded, then negated"
        );
        assert_eq!(folded_chars(r"[^a-c]", insensitive), 3 * 2);
        // Each side of the difference folds once for itself, once for the operation and once
        // for the bracket around it.
        assert_eq!(
            folded_chars(r"[\p{Any}--\p{Any}]", insensitive),
            2 * 3 * all
        );
        // A flag anywhere counts every class (literals alone fold in no time).
        assert_eq!(folded_chars(r"x(?i:y)[a-z]", regex), 26 * 2);
        assert_eq!(folded_chars("a%_b", Pattern::Like(true)), 0);
        assert!(folded_chars(r"(?i)\w", regex) > 100_000);
    }

    #[test]
    fn sets_of_literals_are_measured_by_their_bytes() {
        let regex = Pattern::Regex(false);
        // 250 literals of 99 bytes (a class cross product before a long text).
        let long = format!("[a-j][a-e][a-e]{}", "x".repeat(96));
        assert!(
            literal_set_bytes(&long, regex) >= 250 * 99,
            "{}",
            literal_set_bytes(&long, regex)
        );
        // 3000 alternatives of 12 bytes.
        let alternation: Vec<String> = (1000..4000).map(|i| format!("{i}q000abcdefg")).collect();
        assert!(literal_set_bytes(&alternation.join("|"), regex) >= 3000 * 12);
        assert!(literal_set_bytes("hello|world", regex) <= 10);
        assert!(literal_set_bytes("a%b", Pattern::Like(false)) <= 2);
    }

    #[test]
    fn divisions_need_a_nonzero_constant() {
        use DataType::*;
        use datafusion::logical_expr::{col, lit};
        let x = col("x");
        assert!(arithmetic_is_total(
            Operator::Divide,
            &Float64,
            &Float64,
            &x
        ));
        assert!(!arithmetic_is_total(Operator::Divide, &Int64, &Int64, &x));
        assert!(!arithmetic_is_total(
            Operator::Divide,
            &Int64,
            &Int64,
            &lit(0i64)
        ));
        assert!(!arithmetic_is_total(
            Operator::Modulo,
            &Int64,
            &Int64,
            &lit(-1i64)
        ));
        assert!(arithmetic_is_total(
            Operator::Divide,
            &Int64,
            &Int64,
            &lit(10i64)
        ));
        // The divisor is the literal's value after its cast: 0.5 as an integer is 0.
        let zero = datafusion::logical_expr::cast(lit(0.5), Int64);
        assert!(!arithmetic_is_total(
            Operator::Divide,
            &Int64,
            &Int64,
            &zero
        ));
        assert!(arithmetic_is_total(Operator::Multiply, &Int64, &Int64, &x));
        assert!(arithmetic_is_total(
            Operator::Multiply,
            &Decimal128(15, 2),
            &Decimal128(23, 2),
            &x
        ));
        assert!(!arithmetic_is_total(
            Operator::Multiply,
            &Decimal128(38, 4),
            &Decimal128(23, 2),
            &x
        ));
        assert!(!arithmetic_is_total(Operator::Plus, &Date32, &Int64, &x));
    }
}
