//! The keyed hashes of the bounding step, under one secret key per query run drawn from the
//! run's generator: never SQL `random()`, never the row order.
//!
//! - [`RowId`]: the privacy unit of a table that declares none, where each row is its own
//!   unit: a 128-bit keyed hash of the row's values. Two identical rows get one id and are
//!   bounded together as one unit, which changes any released cell by no more than one unit's
//!   bound when one of them is removed (they fall in the same groups with the same values).
//! - [`KeyedHash`]: the order in which a unit's groups (and a unit's values, for quantiles)
//!   are kept when there are more than the bound: a function of that unit's own rows only.
//!
//! SipHash-1-3 with a 128-bit key is a pseudorandom function (Aumasson & Bernstein 2012), so
//! without the key the choices look random and cannot be steered by the query.

use std::fmt;
use std::hash::Hasher as _;
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, FixedSizeBinaryBuilder};
use datafusion::arrow::datatypes::DataType;
use datafusion::arrow::row::{RowConverter, SortField};
use datafusion::common::Column;
use datafusion::logical_expr::{
    ColumnarValue, Expr, LogicalPlan, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};
use dpml_mechanisms::DpRng;
use siphasher::sip128::{Hasher128, SipHasher13};

use crate::error::{Result, SqlError};

/// The secret key of one query run.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct KeyedHash {
    k0: u64,
    k1: u64,
}

impl fmt::Debug for KeyedHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("KeyedHash(secret)")
    }
}

impl KeyedHash {
    /// A fresh secret key from the run's generator.
    pub(crate) fn draw(rng: &mut DpRng) -> Self {
        Self {
            k0: rng.next_u64(),
            k1: rng.next_u64(),
        }
    }

    /// The 64-bit keyed hash of the byte strings `parts` (each length-prefixed, so that
    /// different splits of the same bytes differ).
    pub(crate) fn hash(&self, parts: &[&[u8]]) -> u64 {
        let mut h = SipHasher13::new_with_keys(self.k0, self.k1);
        for p in parts {
            h.write_u64(p.len() as u64);
            h.write(p);
        }
        h.finish()
    }

    fn hash128(&self, bytes: &[u8]) -> [u8; 16] {
        let mut h = SipHasher13::new_with_keys(self.k0, self.k1);
        h.write(bytes);
        h.finish128().as_bytes()
    }
}

/// The row-id function of a run (see the module docs).
pub(crate) struct RowId {
    udf: Arc<ScalarUDF>,
}

impl RowId {
    pub(crate) fn new(key: KeyedHash) -> Self {
        Self {
            udf: Arc::new(ScalarUDF::new_from_impl(RowIdFn {
                key,
                signature: Signature::variadic_any(Volatility::Immutable),
            })),
        }
    }

    /// The row id of `plan`'s rows, over all its columns.
    pub(crate) fn expr(&self, plan: &LogicalPlan) -> Result<Expr> {
        let args: Vec<Expr> = (0..plan.schema().fields().len())
            .map(|i| Expr::Column(Column::from(plan.schema().qualified_field(i))))
            .collect();
        if args.is_empty() {
            return Err(SqlError::internal("a row id of a table without columns"));
        }
        Ok(self.udf.call(args))
    }
}

#[derive(PartialEq, Eq, Hash)]
struct RowIdFn {
    key: KeyedHash,
    signature: Signature,
}

/// The row-id function's name in plans.
pub(crate) const ROW_ID_FUNCTION: &str = "dpml_row_id";

impl fmt::Debug for RowIdFn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(ROW_ID_FUNCTION)
    }
}

impl ScalarUDFImpl for RowIdFn {
    fn name(&self) -> &str {
        ROW_ID_FUNCTION
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> datafusion::error::Result<DataType> {
        Ok(DataType::FixedSizeBinary(16))
    }

    fn invoke_with_args(
        &self,
        args: ScalarFunctionArgs,
    ) -> datafusion::error::Result<ColumnarValue> {
        let n = args.number_rows;
        let arrays: Vec<ArrayRef> = args
            .args
            .iter()
            .map(|a| a.to_array(n))
            .collect::<datafusion::error::Result<_>>()?;
        let fields = arrays
            .iter()
            .map(|a| SortField::new(a.data_type().clone()))
            .collect();
        let rows = RowConverter::new(fields)?.convert_columns(&arrays)?;
        let mut out = FixedSizeBinaryBuilder::with_capacity(n, 16);
        for row in rows.iter() {
            out.append_value(self.key.hash128(row.as_ref()))?;
        }
        Ok(ColumnarValue::Array(Arc::new(out.finish())))
    }
}
