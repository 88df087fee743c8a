//! Every refused construct is refused before any row is read, naming it and the reason.

use super::{request, shop};
use crate::error::SqlError;

/// A public side of 12 rows with the same key: the 2 released cells and 10 more.
macro_rules! union_of_cells {
    () => {
        "(SELECT priority FROM (SELECT priority, COUNT(*) AS c FROM orders GROUP BY priority) t \
         UNION ALL VALUES ('hi'), ('hi'), ('hi'), ('hi'), ('hi'), ('hi'), ('hi'), ('hi'), ('hi'), \
         ('hi'))"
    };
}

/// Ten `translate` calls on private and public text.
macro_rules! translate_terms {
    () => {
        "translate(i.flag, p.s, p.s) = 'x' OR translate(i.flag, p.s, p.s) = 'y' OR \
         translate(i.flag, p.s, p.s) = 'z' OR translate(i.flag, p.s, p.s) = 'w' OR \
         translate(i.flag, p.s, p.s) = 'v' OR translate(i.flag, p.s, p.s) = 'u' OR \
         translate(i.flag, p.s, p.s) = 't' OR translate(i.flag, p.s, p.s) = 's' OR \
         translate(i.flag, p.s, p.s) = 'r' OR translate(i.flag, p.s, p.s) = 'q'"
    };
}

/// (query, δ, words of the construct, words of the reason).
const REFUSED: &[(&str, f64, &str, &str)] = &[
    (
        // 16 MiB compiled: some 55 ms a batch, spent only on batches a row of unit 7 reaches.
        "SELECT COUNT(*) FROM orders WHERE o_cust = 7 AND priority ~ '\\w{200}'",
        0.0,
        "orders.priority ~",
        "compiles to more than 1024 KiB",
    ),
    (
        // Nine patterns of 512 KiB compiled each: 18 MiB of work counted.
        "SELECT COUNT(*) FROM orders WHERE o_cust = 7 AND (priority ~ '\\w{10}' OR \
         priority ~ '\\w{10}a' OR priority ~ '\\w{10}b' OR priority ~ '\\w{10}c' OR \
         priority ~ '\\w{10}d' OR priority ~ '\\w{10}e' OR priority ~ '\\w{10}f' OR \
         priority ~ '\\w{10}g' OR priority ~ '\\w{10}h')",
        0.0,
        "expressions on private rows",
        "work through",
    ),
    (
        // Each aggregate reads the private rows again: nine of 2 MiB each are 18 MiB.
        "SELECT COUNT(*) FROM orders WHERE priority ~ '\\w{10}' UNION ALL \
         SELECT COUNT(*) FROM orders WHERE priority ~ '\\w{10}a' UNION ALL \
         SELECT COUNT(*) FROM orders WHERE priority ~ '\\w{10}b' UNION ALL \
         SELECT COUNT(*) FROM orders WHERE priority ~ '\\w{10}c' UNION ALL \
         SELECT COUNT(*) FROM orders WHERE priority ~ '\\w{10}d' UNION ALL \
         SELECT COUNT(*) FROM orders WHERE priority ~ '\\w{10}e' UNION ALL \
         SELECT COUNT(*) FROM orders WHERE priority ~ '\\w{10}f' UNION ALL \
         SELECT COUNT(*) FROM orders WHERE priority ~ '\\w{10}g' UNION ALL \
         SELECT COUNT(*) FROM orders WHERE priority ~ '\\w{10}h'",
        0.0,
        "expressions on private rows",
        "over all the query's aggregates",
    ),
    (
        "SELECT COUNT(*) FROM orders WHERE priority = ANY(SELECT label FROM flags)",
        0.0,
        "ANY",
        "IN (subquery) or EXISTS",
    ),
    (
        "SELECT priority, SUM(total) OVER (PARTITION BY priority) FROM orders",
        0.0,
        "sum(orders.total)",
        "window function",
    ),
    (
        "SELECT o_cust, COUNT(*) FROM orders GROUP BY o_cust",
        0.0,
        "SELECT of private rows",
        "only aggregates",
    ),
    (
        "SELECT * FROM orders",
        0.0,
        "SELECT of private rows of orders",
        "returns rows",
    ),
    (
        "SELECT total, COUNT(*) FROM orders GROUP BY total",
        0.0,
        "GROUP BY orders.total",
        "keys are private",
    ),
    (
        "SELECT SUM(price) FROM items",
        0.0,
        "sum(items.price)",
        "no declared bounds",
    ),
    (
        "SELECT COUNT(*) FROM orders a JOIN orders b ON a.priority = b.priority",
        0.0,
        "JOIN of orders and orders",
        "two units",
    ),
    // A unit with r orders would have r × r rows (r to the k with k joins) before its
    // contributions are bounded.
    (
        "SELECT COUNT(*) FROM orders a JOIN orders b ON a.o_cust = b.o_cust",
        0.0,
        "JOIN of orders and orders",
        "r × r rows",
    ),
    // Each cross join with the public flags (3 rows) triples a unit's rows:
    // 3^7 > 1000 before any bound applies.
    (
        "SELECT COUNT(*) FROM orders o, flags f1, flags f2, flags f3, flags f4, flags f5, \
         flags f6, flags f7",
        0.0,
        "joins of private rows with public rows",
        "up to 2187 times",
    ),
    (
        "SELECT COUNT(*) FROM items i JOIN (SELECT flag, repeat(label, 20000) AS l FROM flags) f \
         ON i.flag = f.flag WHERE length(f.l) > 3",
        0.0,
        "the computed column l of public rows",
        "holds 160000 bytes",
    ),
    // Text built from 16 parts, concatenated 16 times above: 256 parts.
    (
        "SELECT SUM(CASE WHEN length(u.t) > 3 THEN 1 ELSE 0 END) FROM (SELECT o_cust, s.l || s.l || s.l || s.l || s.l || s.l || s.l || s.l || s.l || s.l || s.l || s.l || s.l || s.l || s.l || s.l AS t FROM (SELECT o_cust, \
         priority || priority || priority || priority || priority || priority || priority || priority || priority || priority || priority || priority || priority || priority || priority || priority AS l FROM orders) s) u",
        0.0,
        "s.l || s.l",
        "concatenates 256 columns",
    ),
    // 20 repeats of a public row of up to 64,001 bytes: 1.28 MB added to each private row.
    (
        "SELECT COUNT(*) FROM items i JOIN (SELECT f.flag, repeat(f.label, 8000) AS big FROM \
         flags f, (VALUES (0), (1), (2), (3), (4), (5), (6), (7), (8), (9), (10), (11), (12), (13), (14), (15), (16), (17), (18), (19)) v(x)) p ON i.flag = p.flag",
        0.0,
        "joins of private rows with public rows",
        "1280020 bytes",
    ),
    // A public subquery left in an aggregate's argument: DataFusion cannot run it (and it
    // would run only when rows reach it).
    (
        "SELECT COUNT(CASE WHEN length((SELECT MAX(label) FROM flags) || priority) > 3 THEN 1 \
         END) FROM orders",
        0.0,
        "a subquery DataFusion cannot turn into a join",
        "write it as a join",
    ),
    // MAX of a 16-part text is as long as it: 16 copies of it are 256 parts.
    (
        "SELECT SUM(CASE WHEN length(u.t) > 3 THEN 1 ELSE 0 END) FROM (SELECT o_cust, \
         MAX(s.l || s.l || s.l || s.l || s.l || s.l || s.l || s.l || s.l || s.l || s.l || s.l || s.l || s.l || s.l || s.l) AS t FROM (SELECT o_cust, MAX(priority || priority || priority || priority || priority || priority || priority || priority || priority || priority || priority || priority || priority || priority || priority || priority) AS l FROM orders \
         GROUP BY o_cust) s GROUP BY o_cust) u",
        0.0,
        "s.l || s.l",
        "concatenates 256 columns",
    ),
    // Binary constants count their bytes.
    (
        "SELECT COUNT(CASE WHEN md5(TRY_CAST(priority AS BYTEA) || CAST(repeat('A', 40000) AS \
         BYTEA) || CAST(repeat('A', 40000) AS BYTEA)) > 'a' THEN 1 END) FROM orders",
        0.0,
        "",
        "at most 64 KiB of constants",
    ),
    // A join key computed on public rows would be computed only when private rows reach it.
    (
        "SELECT COUNT(*) FROM items i WHERE EXISTS (SELECT 1 FROM flags f WHERE \
         upper(f.flag) = i.flag)",
        0.0,
        "the join key upper(",
        "only when private rows reach the join",
    ),
    // DataFusion answers IN (subquery) as true or false under OR and NOT, never NULL.
    (
        "SELECT COUNT(*) FROM items i WHERE i.qty > 3 OR i.flag NOT IN (SELECT flag FROM flags)",
        0.0,
        "i.flag NOT IN (<subquery>)",
        "answers it as false",
    ),
    // NOT IN even as a whole condition: DataFusion's null-aware join reads the public rows
    // only when private rows reach it; and in a join's condition.
    (
        "SELECT COUNT(*) FROM items i WHERE i.qty > 3 AND i.flag NOT IN (SELECT flag FROM flags)",
        0.0,
        "i.flag NOT IN (<subquery>)",
        "reads the public rows only when some private row passed",
    ),
    (
        "SELECT COUNT(*) FROM items i JOIN flags f ON f.flag = i.flag OR i.flag NOT IN (SELECT \
         flag FROM flags WHERE label = 'Other')",
        0.0,
        "i.flag NOT IN (<subquery>)",
        "NOT EXISTS",
    ),
    (
        "SELECT COUNT(*) FROM items i WHERE (i.flag IN (SELECT flag FROM flags)) IS NULL",
        0.0,
        "i.flag IN (<subquery>)",
        "write EXISTS or NOT EXISTS",
    ),
    // The cast to DOUBLE of a DOUBLE is dropped: two aggregates become one.
    (
        "SELECT AVG(total) AS a, AVG(CAST(total AS DOUBLE)) AS b FROM orders",
        0.0,
        "two columns that are both avg(orders.total)",
        "same expression once simplified",
    ),
    // TRY_CAST fails too (a date out of chrono's range as text).
    (
        "SELECT COUNT(*) FROM items i WHERE EXISTS (SELECT 1 FROM (SELECT arrow_cast(100000000, \
         'Date32') AS d FROM flags) f WHERE TRY_CAST(f.d AS VARCHAR) = i.flag)",
        0.0,
        "the join key TRY_CAST(",
        "only when private rows reach the join",
    ),
    // A public side is computed in full, without noise: private rows in a subquery of one
    // of its expressions (an aggregate's argument, a window's ORDER BY, a HAVING) would be
    // read as they are.
    (
        "SELECT COUNT(*) FROM items i JOIN (SELECT f.flag, MAX(f.label || (SELECT \
         string_agg(priority, ';') FROM orders)) AS m FROM flags f GROUP BY f.flag) p ON \
         p.flag = i.flag",
        0.0,
        "a subquery on table orders inside a public side of a join",
        "without noise",
    ),
    (
        "SELECT COUNT(*) FROM items i JOIN (SELECT f.flag, SUM(length(f.label)) OVER (ORDER BY \
         (SELECT MAX(total) FROM orders)) AS w FROM flags f) p ON p.flag = i.flag",
        0.0,
        "a subquery on table orders inside a public side of a join",
        "without noise",
    ),
    (
        "SELECT COUNT(*) FROM items i WHERE i.flag IN (SELECT f.flag FROM flags f GROUP BY \
         f.flag HAVING MAX(length(f.label)) > (SELECT COUNT(*) FROM orders WHERE total > 5))",
        0.0,
        "a subquery on table orders inside a public side of a join",
        "without noise",
    ),
    // A semi-join's condition beside its keys runs on each pair of matching rows: its
    // public side's rows per key count as an inner join's repeats.
    (
        "SELECT COUNT(*) FROM items i WHERE EXISTS (SELECT 1 FROM (SELECT 'x' AS flag, \
         CAST(t.v AS VARCHAR) AS s FROM unnest(range(0, 2000)) AS t(v)) p WHERE p.flag = i.flag \
         AND starts_with(md5(p.s), i.flag))",
        0.0,
        "joins of private rows with public rows",
        "up to 2000 times",
    ),
    // Hashing 40 KB on each of 500 repeats of a private row: 60 MB per row of one unit.
    (
        "SELECT COUNT(*) FROM items i JOIN (SELECT 'x' AS flag, CAST(t.v AS VARCHAR) AS s FROM \
         unnest(range(0, 500)) AS t(v)) p ON p.flag = i.flag WHERE length(md5(concat(p.s, i.flag, \
         repeat('ab', 20000)))) > 3",
        0.0,
        "expressions on private rows",
        "on each of its 500 rows after the joins",
    ),
    // translate reads its sets for each row: 10 calls read 2 × 40 KB each on each of 25
    // repeats, 20 MB (its result is only as long as its first argument).
    (
        concat!(
            "SELECT COUNT(*) FROM items i JOIN (SELECT 'x' AS flag, repeat('ab', 20000) AS s \
             FROM unnest(range(0, 25)) AS t(v)) p ON p.flag = i.flag WHERE ",
            translate_terms!()
        ),
        0.0,
        "expressions on private rows",
        "on each of its 25 rows after the joins",
    ),
    // Dictionary-encoded text is measured as text.
    (
        "SELECT COUNT(*) FROM items i JOIN (SELECT flag, arrow_cast(repeat(label, 20000), \
         'Dictionary(Int32, Utf8)') AS l FROM flags) f ON i.flag = f.flag WHERE length(f.l) > 3",
        0.0,
        "the computed column l of public rows",
        "holds 160000 bytes",
    ),
    // A union adds its branches' rows: 2 cells and 10 rows per join, 12 × 12 × 12 = 1728.
    (
        concat!(
            "SELECT COUNT(*) FROM orders o JOIN ",
            union_of_cells!(),
            " p1 ON o.priority = p1.priority JOIN ",
            union_of_cells!(),
            " p2 ON o.priority = p2.priority JOIN ",
            union_of_cells!(),
            " p3 ON o.priority = p3.priority"
        ),
        0.0,
        "joins of private rows with released cells",
        "up to 1728 times",
    ),
    // How many cells pass the threshold, so how often the join repeats a row, is not known
    // before the release.
    (
        "SELECT COUNT(t.n) FROM orders o JOIN (SELECT total, COUNT(*) AS n FROM orders GROUP BY \
         total) t ON o.total = t.total",
        1e-6,
        "released cells of unknown number",
        "known only after the release",
    ),
    // Two released cells (public keys) crossed with 6 copies of the 3 flags in one subquery:
    // up to 2·3^6 rows per order, bounded before the cells are released.
    (
        "SELECT COUNT(s.n) FROM orders o, (SELECT t.n FROM (SELECT priority, COUNT(*) AS n FROM \
         orders GROUP BY priority) t, flags a, flags b, flags c, flags d, flags e, flags f) s",
        0.0,
        "joins of private rows with released cells",
        "up to 1458 times",
    ),
    // A subquery inside an expression of the released part would be run without noise
    // (it released the exact count next to the noisy one).
    (
        "SELECT n, (SELECT COUNT(*) FROM orders) AS exact FROM (SELECT COUNT(*) AS n FROM \
         orders) t",
        0.0,
        "a subquery on table orders inside an expression",
        "without noise",
    ),
    (
        "SELECT (SELECT COUNT(*) FROM orders)",
        0.0,
        "a subquery on table orders inside an expression",
        "aggregate in FROM",
    ),
    // DataFusion would build the folded constant while planning.
    (
        "SELECT COUNT(*) FROM orders WHERE length(repeat('x', 1000 * 1000 * 1000)) > total",
        0.0,
        "repeat(…, 1000 * 1000 * 1000, …)",
        "at most 65536",
    ),
    // cust_id is unique in customers, but no longer once joined to a customer's orders.
    (
        "SELECT COUNT(*) FROM customers c JOIN orders a ON c.cust_id = a.o_cust JOIN orders b \
         ON c.cust_id = b.o_cust",
        0.0,
        "JOIN of customers, orders and orders",
        "r × r rows",
    ),
    (
        "SELECT priority, SUM(total * random()) FROM orders GROUP BY priority",
        0.0,
        "random()",
        "volatile",
    ),
    // Whether these fail would tell whether customer 7 has an order: each is refused before
    // any row is read, whatever the rows are.
    (
        "SELECT COUNT(*) FROM orders WHERE CASE WHEN o_cust = 7 THEN order_id / 0 ELSE 0 END = 1",
        0.0,
        "orders.order_id / Int64(0)",
        "fail on a row's value",
    ),
    (
        "SELECT COUNT(*) FROM orders WHERE o_cust = 7 AND CAST(priority AS INT) > 0",
        0.0,
        "CAST(orders.priority AS Int32)",
        "TRY_CAST",
    ),
    (
        "SELECT SUM(LEAST(GREATEST(abs(total - 9223372036854775807 - 2), 0), 5)) FROM orders",
        0.0,
        "abs()",
        "cannot fail",
    ),
    (
        "SELECT COUNT(*) FROM orders WHERE to_date(priority) > DATE '2000-01-01'",
        0.0,
        "to_date()",
        "cannot fail",
    ),
    (
        "SELECT COUNT(*) FROM (SELECT o_cust, AVG(CASE WHEN o_cust = 7 THEN \
         CAST(99999999999999999999999999999999999.99 AS DECIMAL(38, 2)) END) a FROM orders \
         GROUP BY o_cust) t WHERE a IS NULL",
        0.0,
        "subquery grouped by the privacy unit",
        "AVG sums in floating point",
    ),
    // A float sum per unit rounds by the batches the engine cuts, which other units' rows
    // move: whether another unit's sum passes 0.5 would change with this unit's rows.
    (
        "SELECT COUNT(*) FROM (SELECT o_cust, SUM(CAST(total AS DOUBLE)) s FROM orders \
         GROUP BY o_cust) t WHERE s > 0.5",
        0.0,
        "subquery grouped by the privacy unit",
        "floating-point sum",
    ),
    (
        "SELECT COUNT(*) FROM (SELECT o_cust, AVG(total) a FROM orders GROUP BY o_cust) t \
         WHERE a > 1",
        0.0,
        "subquery grouped by the privacy unit",
        "AVG sums in floating point",
    ),
    (
        "SELECT label, COUNT(*) FROM items JOIN flags ON CAST(i_order / 0 AS VARCHAR) = \
         flags.flag GROUP BY label",
        0.0,
        "items.i_order / Int64(0)",
        "fail on a row's value",
    ),
    (
        // The foreign key resolved against orders joined to their items: each item meets its
        // order once per item of that order, r × r rows for an order of r items.
        "SELECT COUNT(*) FROM items i JOIN (SELECT o.order_id, o.o_cust FROM orders o JOIN \
         items i2 ON o.order_id = i2.i_order) r ON i.i_order = r.order_id",
        0.0,
        "JOIN",
        "r × r rows",
    ),
    // Operators DataFusion plans on text or numbers and fails on when a row reaches them: a
    // count of customer 7's rows would answer "has customer 7 a row?" by its error.
    (
        "SELECT COUNT(*) FROM orders WHERE o_cust = 7 AND priority @> 'a'",
        0.0,
        "orders.priority @> Utf8(\"a\")",
        "not evaluated on private rows",
    ),
    (
        "SELECT COUNT(*) FROM orders WHERE o_cust = 7 AND priority <@ 'a'",
        0.0,
        "<@",
        "not evaluated on private rows",
    ),
    (
        "SELECT COUNT(*) FILTER (WHERE o_cust = 7 AND priority @@ 'a') FROM orders",
        0.0,
        "@@",
        "not evaluated on private rows",
    ),
    (
        "SELECT COUNT(*) FROM orders WHERE CASE WHEN o_cust = 7 THEN CAST(total AS DOUBLE) @> 1.5 \
         ELSE false END",
        0.0,
        "@>",
        "not evaluated on private rows",
    ),
    // Each of these is total on most values and fails on a few, or on some constants: the
    // same oracle, through a CASE on customer 7.
    (
        "SELECT COUNT(*) FROM orders WHERE substr(priority, CASE WHEN o_cust = 7 THEN \
         -9223372036854775807 - 1 ELSE 1 END) = 'x'",
        0.0,
        "substr()",
        "constant start",
    ),
    (
        "SELECT COUNT(*) FROM orders WHERE date_trunc('year', CASE WHEN o_cust = 7 THEN \
         TIMESTAMP '1677-09-21 00:12:44' ELSE now() END) > now()",
        0.0,
        "date_trunc()",
        "cannot fail",
    ),
    (
        "SELECT COUNT(*) FROM orders WHERE CASE WHEN o_cust = 7 THEN priority ~ \
         '(a{1000}){1000}' ELSE false END",
        0.0,
        "orders.priority ~ Utf8(\"(a{1000}){1000}\")",
        "pattern that compiles",
    ),
    (
        "SELECT COUNT(*) FROM orders WHERE TRY_CAST(TRY_CAST(CASE WHEN o_cust = 7 THEN \
         2147483647 ELSE 0 END AS DATE) AS VARCHAR) = 'x'",
        0.0,
        "TRY_CAST(TRY_CAST(",
        "fails to format as text",
    ),
    (
        "SELECT COUNT(*) FROM orders WHERE replace(priority, 'h', 'hhhhhhhh') = 'x'",
        0.0,
        "replace()",
        "no longer",
    ),
    (
        "SELECT COUNT(*) FROM orders WHERE priority || priority || priority || priority || \
         priority || priority || priority || priority || priority || priority || priority || \
         priority || priority || priority || priority || priority || priority = 'x'",
        0.0,
        "orders.priority || orders.priority",
        "at most 16",
    ),
    (
        "SELECT COUNT(*) FROM orders TABLESAMPLE (10 PERCENT)",
        0.0,
        "TABLESAMPLE",
        "reads every row",
    ),
    (
        "SELECT COUNT(*) FROM orders o, LATERAL (SELECT o.total AS z) l",
        0.0,
        "outer query's column o.total",
        "LATERAL",
    ),
    (
        "SELECT COUNT(*) FROM orders WHERE total > $1",
        0.0,
        "$1",
        "nothing binds it",
    ),
    (
        "SELECT COUNT(o_cust, total) FROM orders",
        0.0,
        "count(orders.o_cust, orders.total)",
        "COUNT of several arguments",
    ),
    (
        "SELECT COUNT(DISTINCT o_cust, total) FROM orders",
        0.0,
        "count(DISTINCT orders.o_cust, orders.total)",
        "COUNT of several arguments",
    ),
    (
        "SELECT a.n, b.n FROM (SELECT COUNT(*) AS n FROM orders) a CROSS JOIN (SELECT \
         COUNT(*) AS n FROM items) b",
        0.0,
        "two result columns named n",
        "name them apart",
    ),
    (
        "SELECT COUNT(*) FROM orders JOIN (SELECT value AS x FROM generate_series(1, 7)) g ON \
         g.x = orders.total",
        0.0,
        "table function generate_series",
        "unnest(generate_series",
    ),
    // In a subquery of the part computed from released cells: refused before the charge, not
    // by the engine after it.
    (
        "SELECT n, (SELECT MAX(label) FROM flags WHERE flag < $1) AS m FROM (SELECT COUNT(*) \
         AS n FROM orders) t",
        0.0,
        "a subquery DataFusion cannot turn into a join",
        "write it as a join",
    ),
    (
        "SELECT n FROM (SELECT COUNT(*) AS n FROM orders) t JOIN flags f ON f.flag < $1",
        0.0,
        "$1",
        "nothing binds it",
    ),
    (
        "SELECT n, (SELECT COUNT(*) FROM flags f WHERE length(f.label) < t.n) AS c FROM \
         (SELECT COUNT(*) AS n FROM orders) t",
        0.0,
        "a subquery DataFusion cannot turn into a join",
        "write it as a join",
    ),
    (
        "SELECT COUNT(*) FROM orders WHERE CASE WHEN o_cust = 7 THEN repeat('ab', 40000) ELSE \
         priority END = 'x'",
        0.0,
        "a constant of 80",
        "at most 64 KiB",
    ),
    // Its time is the product of its arguments' lengths: a timing oracle on one unit's rows.
    (
        "SELECT COUNT(*) FROM orders WHERE levenshtein(priority, 'hi') < 2",
        0.0,
        "levenshtein()",
        "cannot fail",
    ),
    (
        "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3) SELECT \
         COUNT(*) FROM orders, r",
        0.0,
        "WITH RECURSIVE",
        "recursive queries",
    ),
    // Second review round: text that grows through case maps, slow trims, date parts and
    // negations that fail on some types, conversions between dates and times.
    (
        "SELECT COUNT(*) FROM orders WHERE translate(upper(upper(priority)), 'H', 'h') = 'x'",
        0.0,
        "translate()",
        "cannot fail",
    ),
    (
        "SELECT COUNT(*) FROM orders WHERE btrim(priority, \
         'abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmn') = 'x'",
        0.0,
        "btrim()",
        "cannot fail",
    ),
    (
        "SELECT COUNT(*) FROM orders WHERE date_part('year', CASE WHEN o_cust = 7 THEN \
         TIME '12:00:00' END) > 0",
        0.0,
        "date_part()",
        "cannot fail",
    ),
    (
        "SELECT COUNT(*) FROM orders WHERE -TRY_CAST(priority AS INTERVAL) > INTERVAL '1 day'",
        0.0,
        "(- TRY_CAST",
        "only a number is negated",
    ),
    (
        "SELECT COUNT(*) FROM orders WHERE TRY_CAST(TRY_CAST(o_cust AS TIMESTAMP) AS DATE) > \
         DATE '2000-01-01'",
        0.0,
        "TRY_CAST(TRY_CAST(",
        "another date or time type",
    ),
    ("COPY orders TO 'out.csv'", 0.0, "COPY", "only a SELECT"),
    (
        "INSERT INTO orders VALUES (1, 2, 3, 'hi')",
        0.0,
        "INSERT",
        "only a SELECT",
    ),
    ("CREATE TABLE t AS SELECT 1", 0.0, "CREATE", "only a SELECT"),
    (
        "SELECT COUNT(*) FROM (SELECT * FROM orders LIMIT 5)",
        0.0,
        "LIMIT",
        "order",
    ),
    (
        "SELECT label, COUNT(i_order) FROM flags LEFT JOIN items ON flags.flag = items.flag \
         GROUP BY label",
        0.0,
        "Left JOIN of public rows and items",
        "public table",
    ),
    (
        "SELECT MIN(total) FROM orders",
        0.0,
        "min(orders.total)",
        "MIN or MAX",
    ),
    (
        "SELECT COUNT(DISTINCT priority) FROM orders",
        0.0,
        "count(DISTINCT orders.priority)",
        "privacy unit",
    ),
    (
        "SELECT priority, COUNT(*) FROM orders GROUP BY ROLLUP (priority)",
        0.0,
        "ROLLUP",
        "overlapping groups",
    ),
    (
        "SELECT COUNT(*) FROM orders WHERE o_cust NOT IN (SELECT o_cust FROM orders WHERE \
         priority = 'high')",
        0.0,
        "NOT IN (<subquery>)",
        "NOT EXISTS",
    ),
    (
        // Case-insensitive, both sides of the difference fold all of Unicode (some 15 ms
        // each, for each batch a row of unit 7 reaches), and the class compiles to nothing.
        "SELECT COUNT(*) FROM orders WHERE o_cust = 7 AND priority ~* '[\\p{Any}--\\p{Any}]x'",
        0.0,
        "orders.priority ~*",
        "characters to case-fold",
    ),
    (
        "SELECT COUNT(*) FROM orders WHERE o_cust = 7 AND priority ~ '(?i)[^\\p{Any}]x'",
        0.0,
        "orders.priority ~",
        "characters to case-fold",
    ),
    (
        // DataFusion compares a substring that is not a constant at every place of the text.
        "SELECT COUNT(*) FROM orders WHERE strpos(priority, concat(priority, 'x')) > 0",
        0.0,
        "strpos() of a substring that is not a constant",
        "product of the two texts' lengths",
    ),
    (
        // instr and POSITION … IN are its other names.
        "SELECT COUNT(*) FROM orders WHERE instr(priority, priority) > 0 OR \
         position(priority IN 'high') > 0",
        0.0,
        "strpos() of a substring that is not a constant",
        "product of the two texts' lengths",
    ),
    (
        "SELECT label FROM flags",
        0.0,
        "without an aggregate of private rows",
        "only public tables",
    ),
    (
        "SELECT COUNT(*) FROM orders WHERE false",
        0.0,
        "without an aggregate of private rows",
        "always false",
    ),
];

#[test]
fn each_refused_construct_is_named_with_its_reason() {
    let shop = shop(None);
    let engine = shop.engine();
    for &(sql, delta, construct, reason) in REFUSED {
        let err = engine.explain(sql, &request(1.0, delta)).unwrap_err();
        let msg = err.to_string();
        assert!(
            matches!(err, SqlError::Refused { .. }),
            "{sql}: not a refusal: {msg}"
        );
        let lower = msg.to_lowercase();
        assert!(
            lower.contains(&construct.to_lowercase()) && lower.contains(&reason.to_lowercase()),
            "{sql}: {msg}"
        );
    }
}

#[test]
fn the_accepted_forms_of_the_same_queries_plan() {
    let shop = shop(None);
    let engine = shop.engine();
    for sql in [
        "SELECT priority, SUM(total) FROM orders GROUP BY priority",
        "SELECT total, COUNT(*) FROM orders GROUP BY total",
        "SELECT SUM(LEAST(GREATEST(price, 0), 20)) FROM items",
        "SELECT COUNT(*) FROM orders a JOIN (SELECT o_cust, COUNT(*) AS n FROM orders GROUP BY \
         o_cust) b ON a.o_cust = b.o_cust",
        // Along foreign keys, each join meets one row per key: the orders' ids stay unique.
        "SELECT COUNT(*) FROM customers c JOIN orders o ON c.cust_id = o.o_cust JOIN items i \
         ON o.order_id = i.i_order JOIN flags f ON i.flag = f.flag",
        "SELECT label, COUNT(i_order) FROM items JOIN flags ON flags.flag = items.flag GROUP BY label",
        "SELECT COUNT(DISTINCT o_cust) FROM orders",
        "SELECT QUANTILE(total, 0.9) FROM orders",
        // What cannot fail on a row's value: TRY_CAST, DOUBLE arithmetic, division by a
        // non-zero constant, bounded text functions, patterns that compile.
        "SELECT COUNT(*) FROM orders WHERE TRY_CAST(priority AS INT) > 0",
        "SELECT COUNT(*) FROM orders WHERE substr(priority, 2) = 'ig' AND \
         substr(priority, TRY_CAST(o_cust AS INT), 2) = 'hi'",
        "SELECT COUNT(*) FROM orders WHERE replace(priority, 'high', 'h') = 'h' AND \
         concat(priority, '-', priority) = 'x' AND concat_ws('-', priority, priority) = 'x'",
        "SELECT COUNT(*) FROM orders WHERE priority ~ 'h.*' OR priority LIKE '_i%h'",
        "SELECT COUNT(*) FROM orders WHERE priority ~* '\\w+' OR priority ~ '(?i)[\\p{L}\\d]+' \
         OR strpos(priority, 'ig') > 0 OR position('ig' IN priority) > 0",
        "SELECT COUNT(*) FROM orders WHERE CAST(total AS DOUBLE) / o_cust > 1",
        "SELECT priority, COUNT(*) FROM orders WHERE total / 10 > 1 AND total % 7 = 0 GROUP BY priority",
        "SELECT COUNT(*) FROM orders WHERE upper(priority) LIKE 'H%' OR length(priority) > 2",
        "SELECT COUNT(*) FROM orders o WHERE NOT EXISTS (SELECT 1 FROM orders p WHERE \
         p.o_cust = o.o_cust AND p.priority = 'high')",
        // A semi-join's condition is typed in both sides' columns.
        "SELECT COUNT(*) FROM items i WHERE EXISTS (SELECT 1 FROM flags f WHERE f.flag = i.flag \
         AND f.label <> i.flag)",
        // IN where its NULL drops a row as false does, in WHERE and in a join's condition.
        "SELECT COUNT(*) FROM items i WHERE i.qty > 3 OR i.flag IN (SELECT flag FROM flags)",
        "SELECT COUNT(*) FROM items i JOIN flags f ON f.flag = i.flag AND (i.qty > 3 OR i.flag \
         IN (SELECT flag FROM flags WHERE label = 'Other'))",
        // The refused forms' joins with fewer rows per key and shorter constants.
        "SELECT COUNT(*) FROM items i WHERE EXISTS (SELECT 1 FROM (SELECT 'x' AS flag, \
         CAST(t.v AS VARCHAR) AS s FROM unnest(range(0, 200)) AS t(v)) p WHERE p.flag = i.flag \
         AND starts_with(md5(p.s), i.flag))",
        "SELECT COUNT(*) FROM items i JOIN (SELECT 'x' AS flag, CAST(t.v AS VARCHAR) AS s FROM \
         unnest(range(0, 50)) AS t(v)) p ON p.flag = i.flag WHERE length(md5(concat(p.s, i.flag, \
         repeat('ab', 2000)))) > 3",
    ] {
        let delta = if sql.contains("GROUP BY total") {
            1e-6
        } else {
            0.0
        };
        engine
            .explain(sql, &request(1.0, delta))
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
}

/// Patterns too large for arrow's regular expressions, as LIKE and as its operator `~~`.
#[test]
fn a_pattern_that_does_not_compile_is_refused_in_every_spelling() {
    let shop = shop(None);
    let engine = shop.engine();
    let pattern = "_".repeat(60_000);
    for op in ["LIKE", "~~", "ILIKE", "~~*", "NOT LIKE", "!~~"] {
        let sql = format!(
            "SELECT COUNT(*) FROM orders WHERE CASE WHEN o_cust = 7 THEN priority {op} \
             '{pattern}' ELSE false END"
        );
        let msg = engine
            .explain(&sql, &request(1.0, 0.0))
            .unwrap_err()
            .to_string();
        assert!(msg.contains("pattern that compiles"), "{op}: {msg:.300}");
    }
    engine
        .explain(
            "SELECT COUNT(*) FROM orders WHERE priority ~~ 'h_' OR priority ~~* 'L%'",
            &request(1.0, 0.0),
        )
        .unwrap();
}

/// Why `sql` is refused at ε = 1 (empty if it is accepted: a long query is not printed).
fn refusal(engine: &crate::Engine, sql: &str) -> String {
    engine
        .explain(sql, &request(1.0, 0.0))
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default()
}

/// Matching takes time in the product of the compiled pattern and the text's length (where
/// the regex crate's lazy DFA gives up), and a constant added to the text is matched on every
/// row: counted so in the work bound. 60 KB against `a[ab]{8000}c` took seconds on each row.
#[test]
fn a_pattern_counts_its_matching_against_the_text_that_reaches_it() {
    let shop = shop(None);
    let engine = shop.engine();
    let query = |n: usize, constant: usize| {
        format!(
            "SELECT COUNT(*) FROM orders WHERE o_cust = 7 AND (priority || '{}') ~ 'a[ab]{{{n}}}c'",
            "ab".repeat(constant / 2)
        )
    };
    for (n, constant) in [(8000, 60_000), (1000, 20_000), (3000, 60_000)] {
        let msg = refusal(&engine, &query(n, constant));
        assert!(msg.contains("work through"), "{n}, {constant}: {msg:.300}");
    }
    // A pattern on the unit's own text, and a small one on a short constant, are matched.
    for (n, constant) in [(8000, 0), (10, 1000)] {
        engine
            .explain(&query(n, constant), &request(1.0, 0.0))
            .unwrap_or_else(|e| panic!("{n}, {constant}: {e}"));
    }
}

/// A set of literals compiles to no pattern the regex crate measures, but to an automaton of
/// its literals, built again for each batch (some 20 ms for 250 literals of 100 bytes): its
/// bytes count in the work bound.
#[test]
fn a_set_of_literals_counts_its_bytes() {
    let shop = shop(None);
    let engine = shop.engine();
    let alternation: Vec<String> = (1000..4000).map(|i| format!("{i}q000abcdefg")).collect();
    for pattern in [
        format!("[a-j][a-e][a-e]{}", "x".repeat(96)),
        alternation.join("|"),
    ] {
        let sql =
            format!("SELECT COUNT(*) FROM orders WHERE o_cust = 7 AND priority ~ '{pattern}'");
        let msg = refusal(&engine, &sql);
        assert!(msg.contains("work through"), "{msg:.300}");
    }
    engine
        .explain(
            "SELECT COUNT(*) FROM orders WHERE priority ~ 'high|low|medium'",
            &request(1.0, 0.0),
        )
        .unwrap();
}

/// A public side is computed in full before any private row is read: whether it fails, and
/// what it is found to hold, does not depend on whether private rows reach its join.
#[test]
fn a_public_side_fails_or_is_refused_whatever_the_private_rows() {
    let shop = shop(None);
    let engine = shop.engine();
    let run = |sql: &str| {
        let mut rng = dpml_mechanisms::DpRng::seeded(3);
        engine.run(sql, &request(1.0, 0.0), &mut rng, None)
    };
    // A computed column that fails on every public row; `qty = 999` selects no private row.
    let failing = "SELECT COUNT(*) FROM items i JOIN (SELECT flag, CAST(label AS INT) AS z FROM \
                   flags) f ON i.flag = f.flag WHERE i.qty = QTY AND i.qty < f.z";
    for qty in ["999", "1"] {
        let err = run(&failing.replace("QTY", qty)).unwrap_err();
        assert!(err.to_string().contains("Cast error"), "qty {qty}: {err}");
    }
    // A side that reads released cells is computed once they are released, then measured.
    let long = "SELECT COUNT(*) FROM items i JOIN (SELECT f.flag, repeat(f.label, length(f.label) \
                * 20000) AS l FROM flags f CROSS JOIN (SELECT COUNT(*) AS n FROM orders) c) p ON \
                i.flag = p.flag WHERE i.qty = QTY";
    for qty in ["999", "1"] {
        let err = run(&long.replace("QTY", qty)).unwrap_err().to_string();
        assert!(
            err.contains("the computed column l of public rows"),
            "qty {qty}: {err}"
        );
    }
    // Two sides reading released cells, 600 kB a row each: 1.2 MB together.
    let side = "(SELECT c.n, repeat('x', 60000) AS b0, repeat('x', 60000) AS b1, repeat('x', 60000) AS b2, repeat('x', 60000) AS b3, repeat('x', 60000) AS b4, repeat('x', 60000) AS b5, repeat('x', 60000) AS b6, repeat('x', 60000) AS b7, repeat('x', 60000) AS b8, repeat('x', 60000) AS b9 FROM (SELECT COUNT(*) AS n FROM orders) c)";
    let two = format!("SELECT COUNT(*) FROM items i CROSS JOIN {side} p CROSS JOIN {side} q");
    let err = run(&two).unwrap_err().to_string();
    assert!(err.contains("can add 120"), "{err}");
}

/// Public sides are stored within the memory limit, before the charge.
#[test]
fn stored_public_sides_count_against_the_memory_limit() {
    let shop = shop(None);
    let limits = crate::memory::Limits {
        memory: Some(1 << 20),
        spill_dir: None,
    };
    let engine = crate::Engine::with_limits(&shop.decls, &shop.tables, limits).unwrap();
    let sql = "SELECT COUNT(*) FROM items i JOIN (SELECT f.flag || CAST(t.x AS VARCHAR) AS k, \
               repeat(f.label, 100) AS big FROM flags f, unnest(range(1, 5000)) AS t(x)) p ON \
               i.flag = p.k";
    let err = engine.explain(sql, &request(1.0, 0.0)).unwrap_err();
    assert!(
        matches!(err, SqlError::OutOfMemory { charged: false, .. }),
        "{err}"
    );
}

/// DataFusion's analyser cannot resolve an outer query's column two subqueries down; the
/// message says so instead of listing the fields it could see.
#[test]
fn an_outer_column_two_subqueries_down_gets_a_message_saying_so() {
    let shop = shop(None);
    let err = shop
        .engine()
        .explain(
            "SELECT COUNT(*) FROM orders o WHERE o.o_cust IN (SELECT CAST(length(f.label) AS \
             BIGINT) FROM flags f WHERE EXISTS (SELECT 1 FROM flags g WHERE g.flag = \
             o.priority))",
            &request(1.0, 0.0),
        )
        .unwrap_err()
        .to_string();
    assert!(err.contains("not known where it is used"), "{err}");
}
