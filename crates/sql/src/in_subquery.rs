//! `IN (subquery)` only where SQL's NULL cannot change the answer.
//!
//! SQL's `x IN (SELECT …)` is NULL, not false, when `x` is NULL or the subquery holds a NULL
//! and no value matches. DataFusion turns an `IN` inside `OR` (or under `NOT`) into a mark
//! join whose mark is true or false, never NULL: `a OR x NOT IN (…)` then keeps rows that SQL
//! drops (a NULL in the subquery makes `NOT IN` never true). A filter drops a row whose
//! predicate is NULL as it drops one whose predicate is false, so an `IN` is answered right
//! where the predicate only combines it with `AND` and `OR`; and a `NOT IN` that is a whole
//! conjunct of the filter becomes DataFusion's null-aware anti-join, which follows SQL.
//! Anywhere else the query is refused before anything is read.

use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::logical_expr::{BinaryExpr, Expr, LogicalPlan, Operator};

use crate::error::{Result, SqlError, plan_err};

/// Refuses an `IN (subquery)` of a filter of `plan` (subqueries included) whose NULL could
/// change the answer (see the module docs).
pub(crate) fn check(plan: &LogicalPlan) -> Result<()> {
    let mut found = None;
    plan.apply_with_subqueries(|node| {
        if let LogicalPlan::Filter(f) = node {
            found = misplaced(&f.predicate, true).map(ToString::to_string);
        }
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
             DataFusion answers it as false here (under OR, NOT or inside another expression): \
             the count would be wrong; write EXISTS or NOT EXISTS (SELECT 1 … WHERE inner = \
             outer), which are never NULL",
        )),
        None => Ok(()),
    }
}

/// The first `IN (subquery)` of predicate `e` whose NULL could change which rows pass;
/// `conjunct`: `e` is a whole conjunct of the filter.
fn misplaced(e: &Expr, conjunct: bool) -> Option<&Expr> {
    match e {
        Expr::BinaryExpr(BinaryExpr {
            left,
            op: Operator::And,
            right,
        }) => misplaced(left, conjunct).or_else(|| misplaced(right, conjunct)),
        Expr::BinaryExpr(BinaryExpr {
            left,
            op: Operator::Or,
            right,
        }) => misplaced(left, false).or_else(|| misplaced(right, false)),
        Expr::InSubquery(i) if !i.negated || conjunct => in_expression(&i.expr),
        Expr::Not(inner)
            if conjunct && matches!(inner.as_ref(), Expr::InSubquery(i) if !i.negated) =>
        {
            match inner.as_ref() {
                Expr::InSubquery(i) => in_expression(&i.expr),
                _ => None,
            }
        }
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
