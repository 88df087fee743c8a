//! `IN (subquery)` only where SQL's NULL cannot change the answer; `NOT IN (subquery)` never.
//!
//! SQL's `x IN (SELECT …)` is NULL, not false, when `x` is NULL or the subquery holds a NULL
//! and no value matches. DataFusion turns an `IN` inside `OR` (or under `NOT`) into a mark
//! join whose mark is true or false, never NULL: `a OR x NOT IN (…)` then keeps rows that SQL
//! drops (a NULL in the subquery makes `NOT IN` never true). A filter or an inner join's
//! condition drops a row whose predicate is NULL as it drops one whose predicate is false, so
//! an `IN` is answered right where the predicate only combines it with `AND` and `OR`.
//! `NOT IN` is refused wherever it is: over private rows one NULL among any unit's rows would
//! remove every row; where DataFusion follows SQL (a whole condition of the filter) it runs a
//! null-aware anti-join, which it builds only from the private rows and which then reads the
//! public rows only when some private row passed the filter, so its time would tell whether
//! any did (see [`crate::held_joins`]); and a correlated one fails to plan.
//! `NOT EXISTS (SELECT 1 … WHERE inner = outer)` says the same but for NULLs. Checked before
//! anything is read.

use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::logical_expr::{BinaryExpr, Expr, LogicalPlan, Operator};

use crate::error::{Result, SqlError, plan_err};

/// Refuses an `IN (subquery)` of a filter of `plan` (subqueries included) whose NULL could
/// change the answer (see the module docs).
pub(crate) fn check(plan: &LogicalPlan) -> Result<()> {
    let mut found = None;
    plan.apply_with_subqueries(|node| {
        let predicate = match node {
            LogicalPlan::Filter(f) => Some(&f.predicate),
            LogicalPlan::Join(j) => j.filter.as_ref(),
            _ => None,
        };
        found = predicate.and_then(misplaced).map(ToString::to_string);
        Ok(match found {
            Some(_) => TreeNodeRecursion::Stop,
            None => TreeNodeRecursion::Continue,
        })
    })
    .map_err(plan_err)?;
    match found {
        Some(e) => Err(SqlError::refused(
            e,
            "SQL makes IN (subquery) NULL when no value matches and a value is NULL, and \
             DataFusion answers it as false under OR, NOT or inside another expression (the \
             count would be wrong), and runs NOT IN as a join that reads the public rows only \
             when some private row passed the filter (its time would tell whether any did); \
             write EXISTS or NOT EXISTS (SELECT 1 … WHERE inner = outer)",
        )),
        None => Ok(()),
    }
}

/// The first `IN (subquery)` of predicate `e` whose NULL could change which rows pass, or
/// `NOT IN (subquery)` (see the module docs).
fn misplaced(e: &Expr) -> Option<&Expr> {
    match e {
        Expr::BinaryExpr(BinaryExpr {
            left,
            op: Operator::And | Operator::Or,
            right,
        }) => misplaced(left).or_else(|| misplaced(right)),
        Expr::InSubquery(i) if !i.negated => in_expression(&i.expr),
        other => in_expression(other),
    }
}

/// The first `IN (subquery)` anywhere inside `e`.
fn in_expression(e: &Expr) -> Option<&Expr> {
    let mut found = None;
    let _ = e.apply(|node| {
        if matches!(node, Expr::InSubquery(_)) {
            found = Some(node);
            return Ok(TreeNodeRecursion::Stop);
        }
        Ok(TreeNodeRecursion::Continue)
    });
    found
}
