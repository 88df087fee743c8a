//! DataFusion's `percentile_cont` (dpml's `QUANTILE`) without its simplification.
//!
//! DataFusion simplifies `percentile_cont(x, 0.0)` to `min(x)` and `percentile_cont(x, 1.0)` to
//! `max(x)`. dpml refuses MIN and MAX (one unit moves them arbitrarily far) and releases the
//! 0- and 1-quantiles by the exponential mechanism instead, so the function must reach the DP
//! rewrite as written. Everything else is DataFusion's own (public tables still compute it).

use datafusion::arrow::datatypes::{DataType, FieldRef};
use datafusion::error::Result;
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, Documentation, GroupsAccumulator, Signature,
};

/// An aggregate function as DataFusion defines it (each method `percentile_cont` defines),
/// except that the optimizer never rewrites it into another function.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(crate) struct Unsimplified(pub AggregateUDF);

impl AggregateUDFImpl for Unsimplified {
    fn name(&self) -> &str {
        self.0.name()
    }

    fn aliases(&self) -> &[String] {
        self.0.aliases()
    }

    fn signature(&self) -> &Signature {
        self.0.signature()
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        self.0.return_type(arg_types)
    }

    fn accumulator(&self, acc_args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        self.0.accumulator(acc_args)
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        self.0.state_fields(args)
    }

    fn groups_accumulator_supported(&self, args: AccumulatorArgs) -> bool {
        self.0.groups_accumulator_supported(args)
    }

    fn create_groups_accumulator(
        &self,
        args: AccumulatorArgs,
    ) -> Result<Box<dyn GroupsAccumulator>> {
        self.0.create_groups_accumulator(args)
    }

    fn supports_within_group_clause(&self) -> bool {
        self.0.supports_within_group_clause()
    }

    fn documentation(&self) -> Option<&Documentation> {
        self.0.documentation()
    }
}
